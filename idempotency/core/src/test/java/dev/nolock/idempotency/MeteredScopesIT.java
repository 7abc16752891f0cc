package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.idempotency.internal.IdempotencyMetrics;
import dev.nolock.testkit.CapturedStderr;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A caller that passes a per-request value as the scope: the counters of the first scopes are kept
 * per scope, the rest share one overflow series, and every call still runs.
 */
@ExtendWith(PostgresExtension.class)
class MeteredScopesIT {

  private static final String FIRST_RUNS = "nolock.idempotency.first.runs";

  private final PostgresSchema schema;

  MeteredScopesIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
  }

  @Test
  void byDefaultAHundredScopesAreMeteredAndTheRestShareOneSeriesWithOneWarning() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    int cap = IdempotencyConfig.DEFAULT_MAX_METERED_SCOPES;
    IdempotencyKeys<String> keys = keys(IdempotencyConfig.custom().metrics(registry, "scopes"));

    String log;
    try (CapturedStderr err = new CapturedStderr()) {
      runOnceInEach(keys, cap + 50);
      runOnceInEach(keys, cap + 50); // each scope again: no new series, no second warning
      log = err.text();
    }

    assertThat(registry.find(FIRST_RUNS).counters()).hasSize(cap + 1);
    assertThat(firstRuns(registry, "tenant-0")).isEqualTo(2);
    assertThat(firstRuns(registry, IdempotencyMetrics.OVERFLOW_SCOPE)).isEqualTo(2 * 50);
    assertThat(registry.find(FIRST_RUNS).counters().stream().mapToDouble(Counter::count).sum())
        .as("every call ran and was counted")
        .isEqualTo(2 * (cap + 50));
    assertThat(log.lines().filter(l -> l.contains("WARN") && l.contains("maxMeteredScopes")))
        .singleElement()
        .asString()
        .contains("name=\"scopes\"", "more than " + cap + " distinct scopes", "_overflow")
        .doesNotContain("tenant-");
  }

  @Test
  void aConfiguredCapOfThreeMetersThreeScopes() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();

    runOnceInEach(
        keys(IdempotencyConfig.custom().metrics(registry, "three").maxMeteredScopes(3)), 5);

    assertThat(registry.find(FIRST_RUNS).counters()).hasSize(3 + 1);
    assertThat(firstRuns(registry, "tenant-2")).isEqualTo(1);
    assertThat(firstRuns(registry, IdempotencyMetrics.OVERFLOW_SCOPE)).isEqualTo(2);
  }

  /** Negative control: with the cap out of reach, every scope gets its own series. */
  @Test
  void withoutTheCapEveryScopeIsASeries() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    int scopes = IdempotencyConfig.DEFAULT_MAX_METERED_SCOPES + 50;

    runOnceInEach(
        keys(
            IdempotencyConfig.custom()
                .metrics(registry, "uncapped")
                .maxMeteredScopes(IdempotencyConfig.MAX_BOUND)),
        scopes);

    assertThat(registry.find(FIRST_RUNS).counters()).hasSize(scopes);
  }

  /**
   * Without a registry nothing is recorded, so nothing is capped: no per-scope counters are kept
   * and no WARN names a metrics setting the caller never made.
   */
  @Test
  void withoutARegistryThereIsNoCapAndNoWarning() {
    String log;
    try (CapturedStderr err = new CapturedStderr()) {
      runOnceInEach(keys(IdempotencyConfig.custom().maxMeteredScopes(3)), 5);
      log = err.text();
    }

    assertThat(log).doesNotContain("maxMeteredScopes").doesNotContain("distinct scopes");
  }

  /** A plain value that no scope can be: scopes starting with '_' are refused. */
  @Test
  void theOverflowTagIsNoScope() {
    assertThat(IdempotencyMetrics.OVERFLOW_SCOPE).isEqualTo("_overflow");
    IdempotencyKeys<String> keys = keys(IdempotencyConfig.custom());
    for (String reserved : new String[] {IdempotencyMetrics.OVERFLOW_SCOPE, "_", "_payments"}) {
      assertThatThrownBy(
              () -> keys.execute(reserved, Caller.anonymous(), "k", Fingerprint.of("f"), a -> "ok"))
          .as("scope %s", reserved)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("reserved for nolock's own tags")
          .hasMessageContaining("\"payments.create\"");
      assertThatThrownBy(() -> keys.forget(reserved, Caller.anonymous(), "k"))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("reserved for nolock's own tags");
    }
    assertThat(
            keys.execute(
                "payments_create", Caller.anonymous(), "k", Fingerprint.of("f"), a -> "ok"))
        .isInstanceOf(Outcome.Completed.class);
  }

  private IdempotencyKeys<String> keys(IdempotencyConfig.Builder config) {
    return IdempotencyKeys.create(schema.dataSource(), config.build(), ResultCodec.utf8());
  }

  private static double firstRuns(SimpleMeterRegistry registry, String scope) {
    return registry.get(FIRST_RUNS).tag(IdempotencyMetrics.SCOPE_TAG, scope).counter().count();
  }

  /** One first run in each of the scopes {@code tenant-0} to {@code tenant-<scopes - 1>}. */
  private static void runOnceInEach(IdempotencyKeys<String> keys, int scopes) {
    for (int i = 0; i < scopes; i++) {
      assertThat(
              keys.execute(
                  "tenant-" + i,
                  Caller.anonymous(),
                  UUID.randomUUID().toString(),
                  Fingerprint.of("f"),
                  a -> "ok"))
          .isInstanceOf(Outcome.Completed.class);
    }
  }
}
