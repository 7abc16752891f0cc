package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import org.junit.jupiter.api.Test;

class PhasesTest {

  private static final Phases.Step<RuntimeException> NOTHING = attempt -> {};

  @Test
  void aKeyResumesAfterItsRecoveryPoint() {
    Phases<String, RuntimeException> phases =
        Phases.builder()
            .phase("reserved", NOTHING)
            .phase("charged", NOTHING)
            .finish(attempt -> "done");

    assertThat(phases.names()).containsExactly("reserved", "charged");
    assertThat(phases.resumeIndex(Phases.STARTED)).isZero();
    assertThat(phases.resumeIndex("reserved")).isEqualTo(1);
    assertThat(phases.resumeIndex("charged")).isEqualTo(2);
  }

  @Test
  void aRecoveryPointFromRenamedPhasesIsAnIllegalState() {
    Phases<String, RuntimeException> phases =
        Phases.builder().phase("a", NOTHING).finish(attempt -> "x");

    assertThatThrownBy(() -> phases.resumeIndex("old_name"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("renamed or reordered");
  }

  @Test
  void phaseNamesMustBeUniqueLowerCaseAndNotReserved() {
    assertThatThrownBy(() -> Phases.builder().phase("Charged", NOTHING))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("[a-z][a-z0-9_]{0,62}");
    assertThatThrownBy(() -> Phases.builder().phase(Phases.STARTED, NOTHING))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("reserved");
    assertThatThrownBy(() -> Phases.builder().phase(Phases.FINISHED, NOTHING))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Phases.builder().phase("a", NOTHING).phase("a", NOTHING))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("twice");
  }

  @Test
  void aBuilderNamedForACheckedExceptionTakesPhasesThatThrowIt() {
    Phases<String, IOException> phases =
        Phases.builder(IOException.class)
            .phase(
                "read",
                attempt -> {
                  throw new IOException("disk");
                })
            .phase("nothing", attempt -> {})
            .finish(attempt -> "done");

    assertThat(phases.names()).containsExactly("read", "nothing");
    assertThatThrownBy(() -> Phases.builder(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Phases.builder()");
  }

  @Test
  void aSingleActionIsOneFinalPhase() {
    Phases<String, RuntimeException> single = Phases.single(attempt -> "r");

    assertThat(single.names()).isEmpty();
    assertThat(single.resumeIndex(Phases.STARTED)).isZero();
  }
}
