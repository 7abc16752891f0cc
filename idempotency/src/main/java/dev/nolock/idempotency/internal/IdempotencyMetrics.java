package dev.nolock.idempotency.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.util.function.ToDoubleFunction;

/**
 * The counters of one scope, tagged {@code component="idempotency"} and {@code name=<scope>}, never
 * with a key. Registered when the scope is first used, so a dashboard sees zeros from then on. The
 * abandoned-keys gauge belongs to the table, not a scope: see {@link #registerAbandonedKeys}.
 */
public final class IdempotencyMetrics {

  public static final String COMPONENT = "idempotency";

  private final Counter firstRuns;
  private final Counter replays;
  private final Counter inProgress;
  private final Counter fingerprintMismatches;
  private final Counter takeovers;
  private final Counter staleAttempts;
  private final Counter releases;

  public IdempotencyMetrics(MeterRegistry registry, String scope) {
    Tags tags =
        Tags.of(CoordinationMetrics.COMPONENT_TAG, COMPONENT, CoordinationMetrics.NAME_TAG, scope);
    this.firstRuns =
        counter(registry, tags, "first.runs", "Keys seen for the first time; the action ran");
    this.replays = counter(registry, tags, "replays", "Repeats answered with the stored result");
    this.inProgress =
        counter(registry, tags, "in.progress", "Calls answered RequestInProgress (HTTP 409)");
    this.fingerprintMismatches =
        counter(
            registry,
            tags,
            "fingerprint.mismatches",
            "Keys reused with a different request (HTTP 422)");
    this.takeovers =
        counter(registry, tags, "takeovers", "Attempts that took over a key whose lease had ended");
    this.staleAttempts =
        counter(
            registry,
            tags,
            "stale.attempts",
            "Attempts whose phase was rolled back because a newer attempt held the key");
    this.releases =
        counter(registry, tags, "releases", "Keys released for a retry after a retryable failure");
  }

  /**
   * Registers {@code nolock.idempotency.abandoned.keys}, tagged {@code component="idempotency"} and
   * {@code name=<table>}: the table's abandoned keys, counted by {@code count} on every read of the
   * gauge. One gauge per table and registry: a second registration keeps the first one's sampler,
   * which the registry holds strongly, so the gauge does not turn to NaN when a short-lived
   * instance is collected.
   */
  public static <S> void registerAbandonedKeys(
      MeterRegistry registry, String table, S sampler, ToDoubleFunction<S> count) {
    Gauge.builder("nolock.idempotency.abandoned.keys", sampler, count)
        .description(
            "In-progress keys past their first phase, no longer leased, whose retention has run"
                + " out: kept (never purged) until completed or forgotten")
        .tags(CoordinationMetrics.COMPONENT_TAG, COMPONENT, CoordinationMetrics.NAME_TAG, table)
        .strongReference(true)
        .register(registry);
  }

  private static Counter counter(MeterRegistry registry, Tags tags, String name, String help) {
    return Counter.builder("nolock.idempotency." + name)
        .description(help)
        .tags(tags)
        .register(registry);
  }

  public void firstRun() {
    firstRuns.increment();
  }

  public void replay() {
    replays.increment();
  }

  public void inProgress() {
    inProgress.increment();
  }

  public void fingerprintMismatch() {
    fingerprintMismatches.increment();
  }

  public void takeover() {
    takeovers.increment();
  }

  public void staleAttempt() {
    staleAttempts.increment();
  }

  public void release() {
    releases.increment();
  }
}
