package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

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
  }

  @Test
  void theMetricsInstanceNameDefaultsToTheTableAndIsValidated() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    assertThat(IdempotencyConfig.custom().table("app.idem_keys").build().metricsInstanceName())
        .isEqualTo("app.idem_keys");
    IdempotencyConfig named =
        IdempotencyConfig.custom().metrics(registry, "payments-eu").table("k").build();
    assertThat(named.metricsInstanceName()).isEqualTo("payments-eu");
    assertThat(named.meterRegistry()).isSameAs(registry);
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
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (valid values in the others), throws IllegalArgumentException, never a NullPointerException.
   */
  @Test
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer() throws Exception {
    List<String> wrong = new ArrayList<>();
    List<Method> methods = new ArrayList<>();
    for (Method m : IdempotencyConfig.Builder.class.getMethods()) {
      if (m.getDeclaringClass() == IdempotencyConfig.Builder.class
          && !Modifier.isStatic(m.getModifiers())) {
        methods.add(m);
      }
    }
    methods.add(IdempotencyConfig.class.getMethod("custom"));
    for (Method m : methods) {
      Class<?>[] types = m.getParameterTypes();
      for (int i = 0; i < types.length; i++) {
        if (types[i].isPrimitive()) {
          continue;
        }
        Object[] args = new Object[types.length];
        for (int j = 0; j < types.length; j++) {
          args[j] = j == i ? null : nullTestSample(types[j]);
        }
        Object target = Modifier.isStatic(m.getModifiers()) ? null : IdempotencyConfig.custom();
        try {
          m.invoke(target, args);
          wrong.add(m.getName() + ": null parameter " + i + " accepted");
        } catch (InvocationTargetException e) {
          if (!(e.getCause() instanceof IllegalArgumentException)) {
            wrong.add(m.getName() + ": null parameter " + i + " threw " + e.getCause());
          } else if (e.getCause().getMessage() == null || e.getCause().getMessage().isBlank()) {
            wrong.add(m.getName() + ": null parameter " + i + " threw without a message");
          }
        }
      }
    }
    assertThat(methods).hasSizeGreaterThan(3);
    assertThat(wrong).isEmpty();
  }

  private static Object nullTestSample(Class<?> type) {
    if (type == String.class) {
      return "abc";
    }
    if (type == Duration.class) {
      return Duration.ofSeconds(1);
    }
    if (type == RetryPolicy.class) {
      return RetryPolicy.noRetry();
    }
    if (type == MeterRegistry.class) {
      return new SimpleMeterRegistry();
    }
    if (type == LeaseClock.class) {
      return LeaseClock.system();
    }
    throw new AssertionError("no sample value for " + type);
  }
}
