package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;

class QueueConfigTest {

  @Test
  void defaultsAreDocumented() {
    QueueConfig config = QueueConfig.ofDefaults("mail");
    assertThat(config.queue()).isEqualTo("mail");
    assertThat(config.table()).isEqualTo("nolock_jobs");
    assertThat(config.channel()).isEqualTo("nolock_jobs");
    assertThat(config.lease()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.maxAttempts()).isEqualTo(10);
    assertThat(config.backoffBase()).isEqualTo(Duration.ofSeconds(1));
    assertThat(config.backoffMax()).isEqualTo(Duration.ofMinutes(10));
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(config.notifyOnEnqueue()).isTrue();
    assertThat(config.registry()).isEmpty();
  }

  @Test
  void theChannelDefaultsToTheTablesOwnName() {
    assertThat(QueueConfig.custom("q").table("app.jobs").build().channel()).isEqualTo("jobs");
    assertThat(QueueConfig.custom("q").table("app.jobs").channel("wake").build().channel())
        .isEqualTo("wake");
  }

  @Test
  void aTableNameThatIsNotAPlainIdentifierIsRefusedBeforeAnySqlRuns() {
    for (String bad : new String[] {"jobs; drop table x", "Jobs", "a.b.c", "", "x-y"}) {
      assertThatThrownBy(() -> QueueConfig.custom("q").table(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> QueueConfig.custom("q").table("j".repeat(48)))
        .as("its pending-key index would be 64 characters, which PostgreSQL cuts")
        .hasMessageContaining("index names");
    String longest = "j".repeat(QueueConfig.MAX_TABLE_NAME_LENGTH);
    assertThat(QueueConfig.custom("q").table(longest).build().table()).isEqualTo(longest);
    assertThat((longest + "_pending_key_idx").length()).isLessThanOrEqualTo(63);
    assertThatThrownBy(() -> QueueConfig.custom("q").channel("app.wake"))
        .hasMessageContaining("one identifier");
  }

  @Test
  void aBlankOrOverlongQueueNameIsRefused() {
    assertThatThrownBy(() -> QueueConfig.custom(" ")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> QueueConfig.custom("q".repeat(101)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void outOfRangeSettingsAreRefusedWithAHint() {
    QueueConfig.Builder b = QueueConfig.custom("q");
    assertThatThrownBy(() -> b.lease(Duration.ofMillis(500))).hasMessageContaining("1 s");
    assertThatThrownBy(() -> b.maxAttempts(0)).hasMessageContaining("first attempt");
    assertThatThrownBy(() -> b.backoff(Duration.ofSeconds(5), Duration.ofSeconds(1)))
        .hasMessageContaining("maxDelay");
    assertThatThrownBy(() -> b.queryTimeout(Duration.ofMillis(1500)))
        .hasMessageContaining("whole seconds");
    assertThatThrownBy(() -> b.purgeBatchSize(0)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> b.readyCountCap(0)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theBackoffIsARetryPolicyWithTheConfiguredBounds() {
    QueueConfig config =
        QueueConfig.custom("q")
            .maxAttempts(4)
            .backoff(Duration.ofMillis(100), Duration.ofSeconds(2))
            .build();
    assertThat(config.backoff().maxAttempts()).isEqualTo(4);
    assertThat(config.backoff().baseDelay()).isEqualTo(Duration.ofMillis(100));
    assertThat(config.backoff().maxDelay()).isEqualTo(Duration.ofSeconds(2));
  }
}
