package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class WorkerConfigTest {

  @Test
  void defaultsAreDocumentedAndTheBatchFollowsTheConcurrency() {
    WorkerConfig config = WorkerConfig.ofDefaults();
    assertThat(config.concurrency()).isEqualTo(4);
    assertThat(config.batchSize()).isEqualTo(4);
    assertThat(config.claimsInFlight()).isOne();
    assertThat(config.maxHeld()).isEqualTo(4);
    assertThat(config.pollInterval()).isEqualTo(Duration.ofSeconds(1));
    assertThat(config.listen()).isTrue();
    assertThat(config.listenDataSource()).isEmpty();
    assertThat(config.heartbeatInterval()).isEmpty();
    assertThat(config.reapInterval()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.vacuumInterval()).isEmpty();
    assertThat(config.shutdownTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(WorkerConfig.custom().concurrency(8).build().batchSize()).isEqualTo(8);
    assertThat(WorkerConfig.custom().concurrency(8).batchSize(50).build().batchSize())
        .isEqualTo(50);
    assertThat(WorkerConfig.custom().concurrency(8).batchSize(5).claimsInFlight(3).build())
        .extracting(WorkerConfig::maxHeld)
        .as("max(8, 5) + 2 * 5")
        .isEqualTo(18);
  }

  @Test
  void outOfRangeSettingsAreRefused() {
    WorkerConfig.Builder b = WorkerConfig.custom();
    assertThatThrownBy(() -> b.concurrency(0)).hasMessageContaining("1 to 256");
    assertThatThrownBy(() -> b.batchSize(1001)).hasMessageContaining("1 to 1000");
    assertThatThrownBy(() -> b.claimsInFlight(0))
        .hasMessageContaining("claimsInFlight is the number of claim statements")
        .hasMessageContaining("1 to 16, got 0");
    assertThatThrownBy(() -> b.claimsInFlight(17)).hasMessageContaining("got 17");
    assertThatThrownBy(() -> b.pollInterval(Duration.ZERO)).hasMessageContaining("pollInterval");
    assertThatThrownBy(() -> b.selfTestTimeout(Duration.ofMinutes(2)))
        .hasMessageContaining("selfTestTimeout");
    assertThatThrownBy(() -> b.reapInterval(Duration.ofMillis(1)))
        .hasMessageContaining("reapInterval");
    assertThatThrownBy(() -> b.vacuumInterval(Duration.ofMillis(500)))
        .hasMessageContaining("vacuumInterval must be between PT1S and PT24H");
    assertThatThrownBy(() -> b.shutdownTimeout(Duration.ofSeconds(-1)))
        .hasMessageContaining("shutdownTimeout");
    assertThatThrownBy(() -> b.listenDataSource(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("listen DataSource is null");
  }
}
