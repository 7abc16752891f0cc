package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseClock;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

class OwnershipConfigTest {

  private static OwnershipConfig.Builder builder() {
    return OwnershipConfig.custom("127.0.0.1:9092", "orders", "order-appliers");
  }

  @Test
  void defaultsAreTheDocumentedOnes() {
    OwnershipConfig config = builder().build();
    assertThat(config.table()).isEqualTo("nolock_partition_owners");
    assertThat(config.tableName()).isEqualTo(DSL.name("nolock_partition_owners"));
    assertThat(config.ownerId()).matches("\\d+-[0-9a-f]{8}");
    assertThat(config.pollTimeout()).isEqualTo(Duration.ofMillis(500));
    assertThat(config.maxPollRecords()).isEqualTo(100);
    assertThat(config.sessionTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(config.maxPollInterval()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.safetyMargin()).isEqualTo(Duration.ofSeconds(2));
    assertThat(config.commitInterval()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.transactionIdleTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.retryBaseDelay()).isEqualTo(Duration.ofMillis(100));
    assertThat(config.retryMaxDelay()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.closeTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.meterRegistry()).isEmpty();
    assertThat(config.metricsInstanceName()).isEmpty();
    assertThat(config.consumerProperties()).isEmpty();
    assertThat(config.usesConsumerGroupProtocol()).isFalse();
  }

  @Test
  void twoInstancesGetDifferentDefaultOwnerIds() {
    assertThat(builder().build().ownerId()).isNotEqualTo(builder().build().ownerId());
  }

  @Test
  void aQualifiedTableNameIsAccepted() {
    assertThat(builder().table("app.owners").build().tableName())
        .isEqualTo(DSL.name("app", "owners"));
  }

  @Test
  void malformedNamesAreRefused() {
    assertThatThrownBy(() -> OwnershipConfig.custom(" ", "orders", "g"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("bootstrap.servers");
    assertThatThrownBy(() -> OwnershipConfig.custom("h:1", "no spaces", "g"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a Kafka topic name");
    assertThatThrownBy(() -> OwnershipConfig.custom("h:1", "orders", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("consumer group id");
    assertThatThrownBy(() -> builder().table("Owners; DROP TABLE x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("plain SQL identifier");
    assertThatThrownBy(() -> builder().ownerId("a\nb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }

  @Test
  void durationsOutOfRangeAreRefused() {
    assertThatThrownBy(() -> builder().sessionTimeout(Duration.ofMillis(500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sessionTimeout");
    assertThatThrownBy(() -> builder().pollTimeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder().maxPollRecords(0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder().queryTimeout(Duration.ofHours(1)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aSafetyMarginAsLongAsTheSessionTimeoutIsRefused() {
    assertThatThrownBy(
            () ->
                builder()
                    .sessionTimeout(Duration.ofSeconds(3))
                    .safetyMargin(Duration.ofSeconds(3))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no record could ever be applied");
  }

  @Test
  void aPollTimeoutOverHalfTheClaimWindowIsRefused() {
    // Defaults: sessionTimeout 10 s - safetyMargin 2 s = 8 s, half of it 4 s.
    assertThatThrownBy(() -> builder().pollTimeout(Duration.ofSeconds(4).plusMillis(1)).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pollTimeout (PT4.001S) must be at most half of")
        .hasMessageContaining("sessionTimeout - safetyMargin (PT10S - PT2S = PT8S)")
        .hasMessageContaining("Lower pollTimeout to PT4S or less");
    assertThatThrownBy(
            () ->
                builder()
                    .pollTimeout(Duration.ofSeconds(1).plusMillis(1))
                    .sessionTimeout(Duration.ofSeconds(3))
                    .safetyMargin(Duration.ofSeconds(1))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pollTimeout (PT1.001S)")
        .hasMessageContaining("Lower pollTimeout to PT1S or less");
    assertThat(builder().pollTimeout(Duration.ofSeconds(4)).build().pollTimeout())
        .as("exactly half the claim window")
        .isEqualTo(Duration.ofSeconds(4));
  }

  @Test
  void aMaxPollIntervalBelowTheSessionTimeoutIsRefused() {
    assertThatThrownBy(
            () ->
                builder()
                    .sessionTimeout(Duration.ofSeconds(20))
                    .maxPollInterval(Duration.ofSeconds(10))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least as long");
  }

  @Test
  void consumerSettingsTheRunnerOwnsAreRefusedWithTheSetterToUse() {
    assertThatThrownBy(() -> builder().consumerProperty("enable.auto.commit", true))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the runner");
    assertThatThrownBy(() -> builder().consumerProperty("session.timeout.ms", 3000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sessionTimeout(...)");
    assertThatThrownBy(() -> builder().consumerProperty("auto.offset.reset", "earliest"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("last applied offset");
    assertThat(builder().consumerProperty("client.id", "me").build().consumerProperties())
        .containsEntry("client.id", "me");
  }

  @Test
  void theKip848ProtocolRefusesTheClientSideGroupSettings() {
    assertThat(
            builder()
                .consumerProperty("group.protocol", "consumer")
                .build()
                .usesConsumerGroupProtocol())
        .isTrue();
    assertThatThrownBy(
            () ->
                builder()
                    .consumerProperty("group.protocol", "consumer")
                    .consumerProperty("partition.assignment.strategy", "x")
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the broker decides it");
  }

  /**
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (valid values in the others), throws IllegalArgumentException, never a NullPointerException.
   */
  @Test
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer() throws Exception {
    List<String> wrong = new ArrayList<>();
    List<Method> methods = new ArrayList<>();
    for (Method m : OwnershipConfig.Builder.class.getMethods()) {
      if (m.getDeclaringClass() == OwnershipConfig.Builder.class
          && !Modifier.isStatic(m.getModifiers())) {
        methods.add(m);
      }
    }
    methods.add(
        OwnershipConfig.class.getMethod("custom", String.class, String.class, String.class));
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
        Object target = Modifier.isStatic(m.getModifiers()) ? null : builder();
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
      return "client.id";
    }
    if (type == Duration.class) {
      return Duration.ofSeconds(1);
    }
    if (type == Object.class) {
      return "x";
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
