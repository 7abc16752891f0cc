package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class ExactlyOnceConfigTest {

  private static ExactlyOnceConfig.Builder builder() {
    return ExactlyOnceConfig.custom("127.0.0.1:9092", "payments", "payment-enricher", "enricher-1");
  }

  @Test
  void defaultsAreTheDocumentedOnes() {
    ExactlyOnceConfig config = builder().build();
    assertThat(config.transactionalId()).isEqualTo("enricher-1");
    assertThat(config.pollTimeout()).isEqualTo(Duration.ofMillis(500));
    assertThat(config.maxPollRecords()).isEqualTo(100);
    assertThat(config.sessionTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(config.maxPollInterval()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.transactionTimeout()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.commitRetryTimeout()).isEqualTo(Duration.ofMinutes(5));
    assertThat(config.closeTimeout()).isEqualTo(Duration.ofSeconds(30));
  }

  @Test
  void settingsExactlyOnceDependsOnAreRefused() {
    assertThatThrownBy(() -> builder().consumerProperty("isolation.level", "read_uncommitted"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the pipeline");
    assertThatThrownBy(() -> builder().producerProperty("enable.idempotence", false))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the pipeline");
    assertThatThrownBy(() -> builder().producerProperty("transactional.id", "other"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(builder().producerProperty("linger.ms", 10).build().producerProperties())
        .containsEntry("linger.ms", 10);
  }

  @Test
  void aBlankTransactionalIdIsRefused() {
    assertThatThrownBy(() -> ExactlyOnceConfig.custom("h:1", "payments", "g", " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("transactional.id");
  }

  @Test
  void aTransactionTimeoutOutOfRangeIsRefused() {
    assertThatThrownBy(() -> builder().transactionTimeout(Duration.ofMinutes(20)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("transactionTimeout");
  }

  @Test
  void aCommitRetryTimeoutOutOfRangeIsRefused() {
    assertThatThrownBy(() -> builder().commitRetryTimeout(Duration.ofMillis(500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("commitRetryTimeout");
    assertThat(builder().commitRetryTimeout(Duration.ofSeconds(90)).build().commitRetryTimeout())
        .isEqualTo(Duration.ofSeconds(90));
  }

  /**
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (valid values in the others), throws IllegalArgumentException, never a NullPointerException.
   */
  @Test
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer() throws Exception {
    List<String> wrong = new ArrayList<>();
    List<Method> methods = new ArrayList<>();
    for (Method m : ExactlyOnceConfig.Builder.class.getMethods()) {
      if (m.getDeclaringClass() == ExactlyOnceConfig.Builder.class
          && !Modifier.isStatic(m.getModifiers())) {
        methods.add(m);
      }
    }
    methods.add(
        ExactlyOnceConfig.class.getMethod(
            "custom", String.class, String.class, String.class, String.class));
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
    throw new AssertionError("no sample value for " + type);
  }
}
