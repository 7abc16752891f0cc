package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.NullArguments;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class IdempotencyConfigTest {

  @Test
  void theDefaultsAreDocumented() {
    IdempotencyConfig config = IdempotencyConfig.ofDefaults();

    assertThat(config.table()).isEqualTo("nolock_idempotency_keys");
    assertThat(config.lease()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.retention()).isEqualTo(Duration.ofHours(24));
    assertThat(config.waitWhileInProgress().maxAttempts()).isEqualTo(1);
    assertThat(config.purgeBatchSize()).isEqualTo(1000);
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.metricsInstanceName()).isEqualTo("nolock_idempotency_keys");
    assertThat(config.meterRegistry()).as("no registry unless metrics(..) is set").isEmpty();
    assertThat(config.maxWaitingWhileInProgress()).isEqualTo(16);
    assertThat(config.maxMeteredScopes()).isEqualTo(100);
  }

  @Test
  void theWaitingAndMeteredScopeBoundsRunFromOneToTenThousand() {
    IdempotencyConfig config =
        IdempotencyConfig.custom().maxWaitingWhileInProgress(1).maxMeteredScopes(10_000).build();
    assertThat(config.maxWaitingWhileInProgress()).isEqualTo(1);
    assertThat(config.maxMeteredScopes()).isEqualTo(10_000);
    assertThatThrownBy(() -> IdempotencyConfig.custom().maxWaitingWhileInProgress(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage(
            "maxWaitingWhileInProgress(0) is out of range: pass 1 to 10000 (calls waiting at once"
                + " for a key in progress; each holds a thread, so keep it well below your request"
                + " threads).");
    assertThatThrownBy(() -> IdempotencyConfig.custom().maxMeteredScopes(10_001))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("maxMeteredScopes(10001)")
        .hasMessageContaining("a scope names an operation");
  }

  @Test
  void theMetricsInstanceNameDefaultsToTheTableAndIsValidated() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    assertThat(IdempotencyConfig.custom().table("app.idem_keys").build().metricsInstanceName())
        .isEqualTo("app.idem_keys");
    IdempotencyConfig named =
        IdempotencyConfig.custom().metrics(registry, "payments-eu").table("k").build();
    assertThat(named.metricsInstanceName()).isEqualTo("payments-eu");
    assertThat(named.meterRegistry()).containsExactly(registry);
    assertThatThrownBy(() -> IdempotencyConfig.custom().metrics(registry, " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("metrics instance name");
    assertThatThrownBy(() -> IdempotencyConfig.custom().metrics(registry, "x".repeat(101)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("more than 100");
    assertThatThrownBy(() -> IdempotencyConfig.custom().metrics(registry, "eu\n"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }

  @Test
  void tableNamesMustBePlainIdentifiersShortEnoughForTheirSequenceAndIndex() {
    assertThat(IdempotencyConfig.custom().table("app.idem_keys").build().table())
        .isEqualTo("app.idem_keys");
    assertThatThrownBy(() -> IdempotencyConfig.custom().table("keys; drop table x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("plain SQL identifier");
    assertThatThrownBy(() -> IdempotencyConfig.custom().table("Keys"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> IdempotencyConfig.custom().table("k".repeat(51)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("_attempt_seq");
  }

  @Test
  void leasesBelowOneSecondOrInFractionsOfAMillisecondAreRefused() {
    assertThatThrownBy(() -> IdempotencyConfig.custom().lease(Duration.ofMillis(999)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lease");
    assertThatThrownBy(() -> IdempotencyConfig.custom().lease(Duration.ofNanos(1_000_000_001)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> IdempotencyConfig.custom().lease(Duration.ofDays(8)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theRetentionMustOutlastTheLease() {
    assertThatThrownBy(
            () ->
                IdempotencyConfig.custom()
                    .lease(Duration.ofMinutes(10))
                    .retention(Duration.ofMinutes(10))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("longer than the lease");
    assertThatThrownBy(() -> IdempotencyConfig.custom().retention(Duration.ofDays(367)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void purgeBatchesAndQueryTimeoutsAreBounded() {
    assertThatThrownBy(() -> IdempotencyConfig.custom().purgeBatchSize(0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> IdempotencyConfig.custom().purgeBatchSize(100_001))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> IdempotencyConfig.custom().queryTimeout(Duration.ofMillis(1500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whole seconds");
  }

  /**
   * Every public builder method given null in any one of its object parameters (plain values in the
   * others) throws an IllegalArgumentException that says null, never a NullPointerException. The
   * factory, {@code custom()}, takes no argument.
   */
  static Stream<Arguments> nullArguments() {
    return NullArguments.of(IdempotencyConfig::custom, NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("nullArguments")
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer(NullArguments.Call call) {
    call.assertRefusedAsIllegalArgument();
  }
}
