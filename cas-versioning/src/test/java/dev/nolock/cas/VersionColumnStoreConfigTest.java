package dev.nolock.cas;

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
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class VersionColumnStoreConfigTest {

  @Test
  void defaultsAreTheDocumentedOnes() {
    VersionColumnStoreConfig<String, Long> config =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs()).build();

    assertThat(config.table()).isEqualTo("accounts");
    assertThat(config.keyColumn()).isEqualTo("id");
    assertThat(config.versionColumn()).isEqualTo("version");
    assertThat(config.valueColumn()).isEqualTo("value");
    assertThat(config.keyType()).isEqualTo(String.class);
    assertThat(config.retryPolicy().maxAttempts()).isEqualTo(RetryPolicy.DEFAULT_MAX_ATTEMPTS);
    assertThat(config.retryPolicy().maxElapsed()).isEqualTo(RetryPolicy.DEFAULT_MAX_ELAPSED);
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.instanceName()).isNull();
  }

  @Test
  void everySettingIsKept() {
    RetryPolicy retry = RetryPolicy.custom().maxAttempts(3).build();
    LeaseClock clock = () -> 42L;
    VersionColumnStoreConfig<UUID, String> config =
        VersionColumnStoreConfig.custom("app.documents", UUID.class, ValueCodec.strings())
            .keyColumn("doc_id")
            .versionColumn("rev")
            .valueColumn("body")
            .retryPolicy(retry)
            .clock(clock)
            .queryTimeout(Duration.ofSeconds(2))
            .metrics(new SimpleMeterRegistry(), "documents")
            .build();

    assertThat(config.table()).isEqualTo("app.documents");
    assertThat(config.keyColumn()).isEqualTo("doc_id");
    assertThat(config.versionColumn()).isEqualTo("rev");
    assertThat(config.valueColumn()).isEqualTo("body");
    assertThat(config.retryPolicy()).isSameAs(retry);
    assertThat(config.clock()).isSameAs(clock);
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(2));
    assertThat(config.instanceName()).isEqualTo("documents");
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "accounts; DROP TABLE x",
        "\"accounts\"",
        "Accounts",
        "acc'ounts",
        "a.b.c",
        "1accounts",
        ""
      })
  void aTableThatIsNotAPlainIdentifierIsRefusedWithAMessage(String table) {
    assertThatThrownBy(
            () -> VersionColumnStoreConfig.custom(table, String.class, ValueCodec.longs()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("table");
  }

  @ParameterizedTest
  @ValueSource(strings = {"id;", "\"id\"", "ID", "Version", "i d", "x'--"})
  void aColumnThatIsNotAPlainIdentifierIsRefusedWithAMessage(String column) {
    VersionColumnStoreConfig.Builder<String, Long> builder =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs());

    assertThatThrownBy(() -> builder.keyColumn(column))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("key column")
        .hasMessageContaining("[a-z_][a-z0-9_]*");
    assertThatThrownBy(() -> builder.versionColumn(column))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("version column");
    assertThatThrownBy(() -> builder.valueColumn(column))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("value column");
  }

  @Test
  void aColumnIsNamedAloneNotQualified() {
    assertThatThrownBy(
            () ->
                VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs())
                    .keyColumn("accounts.id"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("qualified");
  }

  @Test
  void theSameColumnForTwoRolesIsRefused() {
    VersionColumnStoreConfig.Builder<String, Long> builder =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs())
            .valueColumn("version");

    assertThatThrownBy(builder::build)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("three different columns");
  }

  @Test
  void aKeyTypeTheStoreDoesNotBindIsRefused() {
    assertThatThrownBy(
            () -> VersionColumnStoreConfig.custom("accounts", Object.class, ValueCodec.longs()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("String, Long, Integer or UUID");
  }

  @Test
  void aMissingCodecIsRefused() {
    assertThatThrownBy(() -> VersionColumnStoreConfig.custom("accounts", Long.class, null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ValueCodec.longs()");
  }

  @Test
  void aQueryTimeoutOutsideWholeSecondsUpToFiveMinutesIsRefused() {
    VersionColumnStoreConfig.Builder<String, Long> builder =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs());

    assertThatThrownBy(() -> builder.queryTimeout(Duration.ofMillis(1500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whole seconds");
    assertThatThrownBy(() -> builder.queryTimeout(Duration.ofMinutes(6)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder.queryTimeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aBlankOrOverlongMetricsInstanceNameIsRefused() {
    VersionColumnStoreConfig.Builder<String, Long> builder =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs());
    SimpleMeterRegistry registry = new SimpleMeterRegistry();

    assertThatThrownBy(() -> builder.metrics(registry, " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("metrics instance name");
    assertThatThrownBy(() -> builder.metrics(registry, "x".repeat(101)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("metrics instance name");
  }

  /**
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (valid values in the others), throws IllegalArgumentException, never a NullPointerException.
   */
  @Test
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer() throws Exception {
    List<String> wrong = new ArrayList<>();
    List<Method> methods = new ArrayList<>();
    for (Method m : VersionColumnStoreConfig.Builder.class.getMethods()) {
      if (m.getDeclaringClass() == VersionColumnStoreConfig.Builder.class
          && !Modifier.isStatic(m.getModifiers())) {
        methods.add(m);
      }
    }
    methods.add(
        VersionColumnStoreConfig.class.getMethod(
            "custom", String.class, Class.class, ValueCodec.class));
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
        Object target =
            Modifier.isStatic(m.getModifiers())
                ? null
                : VersionColumnStoreConfig.custom("abc", Long.class, ValueCodec.longs());
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
    if (type == Class.class) {
      return Long.class;
    }
    if (type == ValueCodec.class) {
      return ValueCodec.longs();
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
