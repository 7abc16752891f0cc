package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class MissedSchedulesTest {

  @Test
  void runEachDefaultsToABoundOfTen() {
    assertThat(MissedSchedules.runEach().bound()).isEqualTo(10);
    assertThat(MissedSchedules.runEach().kind()).isEqualTo(MissedSchedules.Kind.RUN_EACH);
  }

  @Test
  void skipAndRunOnceRunOneTimePerCatchUp() {
    assertThat(MissedSchedules.skip().bound()).isOne();
    assertThat(MissedSchedules.runOnce().bound()).isOne();
  }

  @Test
  void aBoundOfAHundredIsTheLargestAccepted() {
    assertThat(MissedSchedules.runEach(100).bound()).isEqualTo(100);
  }

  @Test
  void aBoundOverAHundredIsRefusedWithTheKubernetesReason() {
    assertThatThrownBy(() -> MissedSchedules.runEach(101))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at most 100")
        .hasMessageContaining("Kubernetes CronJob that misses more than 100 start times")
        .hasMessageContaining("runOnce()");
  }

  @Test
  void aBoundBelowOneIsRefused() {
    assertThatThrownBy(() -> MissedSchedules.runEach(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least 1")
        .hasMessageContaining("skip()");
  }

  @Test
  void policiesAreValues() {
    assertThat(MissedSchedules.runEach(3)).isEqualTo(MissedSchedules.runEach(3));
    assertThat(MissedSchedules.runEach(3)).isNotEqualTo(MissedSchedules.runEach(4));
    assertThat(MissedSchedules.runEach(3)).hasToString("runEach(3)");
  }
}
