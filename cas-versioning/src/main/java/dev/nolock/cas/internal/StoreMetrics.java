package dev.nolock.cas.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;

/**
 * The store's six signals, tagged {@code component="store"} and {@code name=<instance>}: conflicts
 * through {@link CoordinationMetrics#conflict()} ({@code nolock.conflicts}), and five counters of
 * this module. All are registered at construction, so dashboards see zeros rather than gaps.
 */
public final class StoreMetrics {

  public static final String COMPONENT = "store";

  /** Conditional writes sent: each insert, compare-and-set, delete, update attempt, batch row. */
  public static final String ATTEMPTS = "nolock.cas.attempts";

  /** {@code update} attempts after the first, each one after a lost race. */
  public static final String RETRIES = "nolock.cas.retries";

  /** {@code update} attempts that took their turn on the row after losing for long enough. */
  public static final String TURNS = "nolock.cas.turns";

  /**
   * Turns that failed with nothing written (PostgreSQL ended them for sitting idle, or the
   * connection failed before the COMMIT), each counted as a lost race.
   */
  public static final String TURNS_ENDED = "nolock.cas.turns_ended";

  /** {@code update} calls that returned a conflict because the retry policy gave up. */
  public static final String GIVE_UPS = "nolock.cas.give_ups";

  private final CoordinationMetrics coordination;
  private final Counter attempts;
  private final Counter retries;
  private final Counter turns;
  private final Counter turnsEnded;
  private final Counter giveUps;

  private StoreMetrics(MeterRegistry registry, String instance) {
    this.coordination = CoordinationMetrics.of(registry, COMPONENT, instance);
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG, COMPONENT, CoordinationMetrics.NAME_TAG, instance);
    this.attempts = counter(registry, tags, ATTEMPTS, "Conditional writes sent to the table");
    this.retries = counter(registry, tags, RETRIES, "update attempts after a lost race");
    this.turns =
        counter(registry, tags, TURNS, "update attempts that took their turn on the row's lock");
    this.turnsEnded =
        counter(
            registry,
            tags,
            TURNS_ENDED,
            "turns that failed with nothing written (ended for sitting idle, or the connection"
                + " failed before the COMMIT), each counted as a lost race");
    this.giveUps = counter(registry, tags, GIVE_UPS, "update calls that gave up on a conflict");
  }

  /** Metrics in {@code registry} for {@code instance}; recorded nowhere when it is null. */
  public static StoreMetrics of(MeterRegistry registry, String instance) {
    return registry == null
        ? new StoreMetrics(new CompositeMeterRegistry(), "none")
        : new StoreMetrics(registry, instance);
  }

  public void attempts(int count) {
    attempts.increment(count);
  }

  public void conflicts(int count) {
    for (int i = 0; i < count; i++) {
      coordination.conflict();
    }
  }

  public void retry() {
    retries.increment();
  }

  public void turn() {
    turns.increment();
  }

  public void turnEnded() {
    turnsEnded.increment();
  }

  public void gaveUp() {
    giveUps.increment();
  }

  private static Counter counter(MeterRegistry registry, Tags tags, String name, String help) {
    return Counter.builder(name).description(help).tags(tags).register(registry);
  }
}
