package dev.nolock.patterns;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import java.time.Duration;
import java.util.regex.Pattern;

/**
 * The signals that make contention and lease trouble visible, on Micrometer, for one instance of a
 * coordination component (one lock, queue, store or fence).
 *
 * <p>The three contention signals: time waiting to acquire ({@code nolock.acquire.wait}, tagged
 * with the outcome), time held ({@code nolock.lease.held}) and conflicts, i.e. attempts that lost a
 * race ({@code nolock.conflicts}). The lease signals: renewals, renewal failures, lease losses and
 * fence rejections. In Prometheus they read {@code nolock_acquire_wait_seconds}, {@code
 * nolock_lease_held_seconds}, {@code nolock_conflicts_total}, {@code nolock_renewals_total}, {@code
 * nolock_renewal_failures_total}, {@code nolock_lease_losses_total} and {@code
 * nolock_fence_rejections_total}.
 *
 * <p>Every meter carries two tags: {@code component} (what kind of thing: {@code lock}, {@code
 * queue}, {@code fence}, ...) and {@code name} (which instance). The name is a configured instance
 * name, <b>never a per-request key</b>: idempotency keys, job ids or entity ids as tags create a
 * time series per request and take the metrics backend down. All meters are registered at
 * construction, so dashboards see zeros rather than gaps.
 */
public final class CoordinationMetrics {

  public static final String COMPONENT_TAG = "component";
  public static final String NAME_TAG = "name";
  public static final String OUTCOME_TAG = "outcome";

  /** Longer instance names are refused: a name that long is usually a per-request key. */
  public static final int MAX_INSTANCE_NAME_LENGTH = 100;

  private static final Pattern COMPONENT = Pattern.compile("[a-z][a-z_]{0,31}");

  private final Timer acquiredAfter;
  private final Timer gaveUpAfter;
  private final Timer held;
  private final Counter conflicts;
  private final Counter renewals;
  private final Counter renewalFailures;
  private final Counter leaseLosses;
  private final Counter releaseFailures;
  private final Counter fenceRejections;

  private CoordinationMetrics(MeterRegistry registry, String component, String instance) {
    if (registry == null) {
      throw new IllegalArgumentException(
          "The meter registry is null: pass the application's MeterRegistry, or configure no"
              + " metrics to record nothing.");
    }
    if (component == null || !COMPONENT.matcher(component).matches()) {
      throw new IllegalArgumentException(
          "The metrics component \""
              + component
              + "\" must match [a-z][a-z_]{0,31}, e.g. \"lock\""
              + " or \"queue\".");
    }
    Names.requireName("metrics instance name", instance, MAX_INSTANCE_NAME_LENGTH);
    Tags tags = Tags.of(COMPONENT_TAG, component, NAME_TAG, instance);
    this.acquiredAfter = waitTimer(registry, tags, "acquired");
    this.gaveUpAfter = waitTimer(registry, tags, "gave_up");
    this.held =
        Timer.builder("nolock.lease.held")
            .description("How long a lease, lock or claim was held before release or loss")
            .tags(tags)
            .register(registry);
    this.conflicts = counter(registry, tags, "nolock.conflicts", "Attempts that lost a race");
    this.renewals = counter(registry, tags, "nolock.renewals", "Successful lease renewals");
    this.renewalFailures =
        counter(registry, tags, "nolock.renewal.failures", "Renewals refused or failed");
    this.leaseLosses =
        counter(registry, tags, "nolock.lease.losses", "Holders told their lease was lost");
    this.releaseFailures =
        counter(
            registry,
            tags,
            "nolock.release.failures",
            "Releases that failed or whose answer was lost; such a lease ends at its TTL");
    this.fenceRejections =
        counter(registry, tags, "nolock.fence.rejections", "Writes refused for a stale token");
  }

  /**
   * Metrics for one instance.
   *
   * @param component the kind of component, e.g. {@code "lock"}, {@code "queue"}, {@code "fence"}
   * @param instance the configured instance name, e.g. the lock or queue name; never a per-request
   *     key
   */
  public static CoordinationMetrics of(MeterRegistry registry, String component, String instance) {
    return new CoordinationMetrics(registry, component, instance);
  }

  /** Metrics that are recorded nowhere, for callers that do not use Micrometer. */
  public static CoordinationMetrics noop() {
    return new CoordinationMetrics(new CompositeMeterRegistry(), "none", "none");
  }

  /** Time spent waiting for an acquisition that succeeded. */
  public void acquired(Duration waited) {
    acquiredAfter.record(waited);
  }

  /** Time spent waiting before giving up on an acquisition. */
  public void gaveUp(Duration waited) {
    gaveUpAfter.record(waited);
  }

  /** Time a lease, lock or claim was held. */
  public void held(Duration heldFor) {
    held.record(heldFor);
  }

  /** One attempt lost a race (lock taken, version moved on, job claimed by another worker). */
  public void conflict() {
    conflicts.increment();
  }

  public void renewed() {
    renewals.increment();
  }

  public void renewalFailed() {
    renewalFailures.increment();
  }

  /** A holder was told it lost its lease. */
  public void leaseLost() {
    leaseLosses.increment();
  }

  /** A release failed or its answer was lost; the lease ends at its TTL at the latest. */
  public void releaseFailed() {
    releaseFailures.increment();
  }

  /** A write carrying a stale token was refused by the resource. */
  public void fenceRejected() {
    fenceRejections.increment();
  }

  private static Timer waitTimer(MeterRegistry registry, Tags tags, String outcome) {
    return Timer.builder("nolock.acquire.wait")
        .description("Time spent waiting to acquire a lease, lock or claim")
        .tags(tags)
        .tag(OUTCOME_TAG, outcome)
        .register(registry);
  }

  private static Counter counter(MeterRegistry registry, Tags tags, String name, String help) {
    return Counter.builder(name).description(help).tags(tags).register(registry);
  }
}
