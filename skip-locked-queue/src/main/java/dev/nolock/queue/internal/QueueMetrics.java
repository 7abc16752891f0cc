package dev.nolock.queue.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * The queue's meters, tagged {@code component="queue"} and {@code name=<instance name>}, and the
 * queue's own meters {@code queue=<queue>} too (never a job id). The shared ones carry only the two
 * tags every nolock component's {@link CoordinationMetrics} carry, so a Prometheus registry that
 * holds a lock's and a queue's meters sees one set of tag keys per meter name. The shared {@link
 * CoordinationMetrics} carry the lease signals (held time, heartbeats as renewals, lost leases,
 * stale finishes as fence rejections); the queue's own meters carry the rest. All are registered at
 * construction, so dashboards see zeros rather than gaps.
 */
public final class QueueMetrics {

  public static final String COMPONENT = "queue";

  /** The tag naming the queue on the queue's own meters. */
  public static final String QUEUE_TAG = "queue";

  /** Which conditional call a stale attempt made. */
  public enum Operation {
    COMPLETE,
    FAIL,
    HEARTBEAT,
    RELEASE
  }

  private final CoordinationMetrics coordination;
  private final Counter enqueued;
  private final Counter duplicates;
  private final Counter claimed;
  private final Counter completions;
  private final Counter failures;
  private final Counter deadLetters;
  private final Counter expired;
  private final Counter released;
  private final Counter purged;
  private final Map<Operation, Counter> stale = new EnumMap<>(Operation.class);
  private final Timer claimLatency;
  private final Timer jobRun;
  private final MeterRegistry registry;
  private final Tags tags;

  /**
   * Metrics for {@code queue} in {@code registry} under {@code instanceName}, or recorded nowhere
   * when the registry is null.
   */
  public QueueMetrics(MeterRegistry registry, String instanceName, String queue) {
    MeterRegistry r = registry != null ? registry : new CompositeMeterRegistry();
    String instance = registry != null ? instanceName : queue;
    this.coordination = CoordinationMetrics.of(r, COMPONENT, instance);
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            COMPONENT,
            CoordinationMetrics.NAME_TAG,
            instance,
            QUEUE_TAG,
            queue);
    this.enqueued = counter(r, tags, "nolock.queue.enqueued", "Jobs inserted");
    this.duplicates =
        counter(r, tags, "nolock.queue.duplicates", "Enqueues skipped for a pending unique key");
    this.claimed = counter(r, tags, "nolock.queue.claimed", "Jobs claimed");
    this.completions = counter(r, tags, "nolock.queue.completions", "Jobs completed");
    this.failures =
        counter(r, tags, "nolock.queue.failures", "Failed attempts, including expired leases");
    this.deadLetters = counter(r, tags, "nolock.queue.dead.letters", "Jobs dead-lettered");
    this.expired =
        counter(r, tags, "nolock.queue.expired", "Expired leases taken back by the reaper");
    this.released = counter(r, tags, "nolock.queue.released", "Claimed jobs handed back unrun");
    this.purged = counter(r, tags, "nolock.queue.purged", "Finished jobs deleted by retention");
    for (Operation op : Operation.values()) {
      stale.put(
          op,
          Counter.builder("nolock.queue.stale.finishes")
              .description("Calls refused because their attempt token was stale")
              .tags(tags)
              .tag("operation", op.name().toLowerCase(Locale.ROOT))
              .register(r));
    }
    this.claimLatency =
        Timer.builder("nolock.queue.claim.duration")
            .description("Time of one claim statement, round trip included")
            .tags(tags)
            .register(r);
    this.jobRun =
        Timer.builder("nolock.queue.job.run")
            .description("Time a handler ran, per attempt")
            .tags(tags)
            .register(r);
    this.registry = r;
    this.tags = tags;
  }

  /** Registers the ready-depth and oldest-age gauges, read through {@code sampler}. */
  public <S> void registerGauges(
      S sampler, ToDoubleFunction<S> readyDepth, ToDoubleFunction<S> oldestAgeSeconds) {
    Gauge.builder("nolock.queue.ready", sampler, readyDepth)
        .description("Due ready jobs (counted up to the configured cap; sampled)")
        .tags(tags)
        .register(registry);
    Gauge.builder("nolock.queue.oldest.ready.age", sampler, oldestAgeSeconds)
        .description("How long the oldest due job has waited (sampled)")
        .baseUnit("seconds")
        .tags(tags)
        .register(registry);
  }

  public CoordinationMetrics coordination() {
    return coordination;
  }

  public void enqueued(int inserted, int skipped) {
    enqueued.increment(inserted);
    duplicates.increment(skipped);
  }

  public void claimed(int count, Duration latency) {
    claimLatency.record(latency);
    claimed.increment(count);
  }

  public void completed() {
    completions.increment();
  }

  /** A failed attempt; {@code dead} when it dead-lettered the job. */
  public void failed(boolean dead) {
    failures.increment();
    if (dead) {
      deadLetters.increment();
    }
  }

  /** The reaper took back {@code requeued + dead} expired leases. */
  public void reaped(int requeued, int dead) {
    expired.increment(requeued + dead);
    failures.increment(requeued + dead);
    deadLetters.increment(dead);
  }

  public void released() {
    released.increment();
  }

  public void purged(long count) {
    purged.increment(count);
  }

  /** A stale attempt's call was refused. */
  public void stale(Operation op) {
    stale.get(op).increment();
    coordination.fenceRejected();
  }

  public void jobRan(Duration duration) {
    jobRun.record(duration);
  }

  private static Counter counter(MeterRegistry r, Tags tags, String name, String help) {
    return Counter.builder(name).description(help).tags(tags).register(r);
  }
}
