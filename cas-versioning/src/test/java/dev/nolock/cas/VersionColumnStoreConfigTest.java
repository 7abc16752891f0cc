package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.testkit.NullArguments;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.UUID;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
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
    assertThat(config.instanceName()).as("metrics off: no instance name").isEmpty();
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
    assertThat(config.instanceName()).containsExactly("documents");
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
  void anUpdateTakesItsTurnAfter20MsByDefaultWithinZeroToAMinuteOrNever() {
    VersionColumnStoreConfig.Builder<String, Long> builder =
        VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs());

    assertThat(builder.build().takeTurnAfter()).contains(Duration.ofMillis(20));
    assertThat(builder.takeTurnAfter(Duration.ZERO).build().takeTurnAfter())
        .contains(Duration.ZERO);
    assertThat(builder.neverTakeTurn().build().takeTurnAfter()).isEmpty();
    assertThat(builder.build().toString()).contains("takeTurnAfter=never");
    assertThatThrownBy(() -> builder.takeTurnAfter(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("neverTakeTurn()");
    assertThatThrownBy(() -> builder.takeTurnAfter(Duration.ofSeconds(61)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 0 and PT1M");
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
   * (plain values in the others), throws an IllegalArgumentException that says null, never a
   * NullPointerException.
   */
  static Stream<Arguments> nullArguments() {
    NullArguments.Values values =
        NullArguments.plainValues()
            .with(Class.class, Long.class)
            .with(ValueCodec.class, ValueCodec.longs());
    return Stream.concat(
        NullArguments.of(
            () -> VersionColumnStoreConfig.custom("abc", Long.class, ValueCodec.longs()), values),
        NullArguments.ofFactory(VersionColumnStoreConfig.class, "custom", values));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("nullArguments")
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer(NullArguments.Call call) {
    call.assertRefusedAsIllegalArgument();
  }
}
