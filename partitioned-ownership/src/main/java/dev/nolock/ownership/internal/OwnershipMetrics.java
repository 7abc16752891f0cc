package dev.nolock.ownership.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The runner's meters, tagged {@code component="ownership"}, {@code name=<consumer group>}, {@code
 * topic} and, per partition, {@code partition}; never a key. Counters for every partition are
 * registered at start (dashboards see zeros, not gaps); the lag gauge of a partition exists only
 * while this instance owns it, so summing lag over instances counts each partition once.
 */
public final class OwnershipMetrics {

  public static final String COMPONENT = "ownership";
  public static final String TOPIC_TAG = "topic";
  public static final String PARTITION_TAG = "partition";
  public static final String EVENT_TAG = "event";

  private final MeterRegistry registry;
  private final Tags base;
  private final Counter[] applied;
  private final Counter[] deadLettered;
  private final Counter[] replays;
  private final Counter[] fenced;
  private final Counter[] claims;
  private final Map<String, Counter> rebalances = new HashMap<>();
  private final Counter backendFailures;
  private final Counter logStartLookupFailures;
  private final AtomicLong steppedAside = new AtomicLong();
  private final AtomicLong[] lag;
  private final Gauge[] lagGauges;

  public OwnershipMetrics(
      MeterRegistry registry, String instanceName, String topic, int partitions) {
    this.registry = registry;
    this.base =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            COMPONENT,
            CoordinationMetrics.NAME_TAG,
            instanceName,
            TOPIC_TAG,
            topic);
    this.applied = new Counter[partitions];
    this.deadLettered = new Counter[partitions];
    this.replays = new Counter[partitions];
    this.fenced = new Counter[partitions];
    this.claims = new Counter[partitions];
    this.lag = new AtomicLong[partitions];
    this.lagGauges = new Gauge[partitions];
    for (int p = 0; p < partitions; p++) {
      Tags tags = base.and(PARTITION_TAG, Integer.toString(p));
      applied[p] = counter("records.applied", "Records whose state change committed", tags);
      deadLettered[p] =
          counter(
              "records.dead.lettered",
              "Records that failed for good, sent to the dead-letter topic and recorded as applied",
              tags);
      replays[p] =
          counter("replays.skipped", "Records skipped: their offset was applied before", tags);
      fenced[p] =
          counter(
              "fenced.writes",
              "Applies refused: the ownership row carries a newer owner's epoch",
              tags);
      claims[p] = counter("claims", "Claims of the partition by this instance (epoch bumps)", tags);
      lag[p] = new AtomicLong();
    }
    this.backendFailures =
        counter(
            "backend.failures",
            "PostgreSQL failures (unreachable, timed out, serialization failure) the runner backed"
                + " off after; Kafka log start lookups are counted apart",
            base);
    this.logStartLookupFailures =
        counter(
            "log.start.lookup.failures",
            "Kafka log start lookups that failed at a claim; the partitions waited, unclaimed, for"
                + " the next turn",
            base);
    Gauge.builder(
            "nolock.ownership.partitions.stepped.aside", steppedAside, AtomicLong::doubleValue)
        .description(
            "Partitions assigned to this instance that it does not own: fenced by a newer epoch"
                + " while assigned, waiting for a rebalance or a session timeout of running")
        .tags(base)
        .register(registry);
    for (String event : new String[] {"assigned", "revoked", "lost"}) {
      rebalances.put(
          event,
          counter(
              "rebalances",
              "Rebalance callbacks that assigned, revoked or lost partitions of the topic",
              base.and(EVENT_TAG, event)));
    }
  }

  private Counter counter(String name, String help, Tags tags) {
    return Counter.builder("nolock.ownership." + name)
        .description(help)
        .tags(tags)
        .register(registry);
  }

  public void applied(int partition) {
    applied[partition].increment();
  }

  public void deadLettered(int partition) {
    deadLettered[partition].increment();
  }

  public void replaySkipped(int partition) {
    replays[partition].increment();
  }

  public void fenced(int partition) {
    fenced[partition].increment();
  }

  public void claimed(int partition) {
    claims[partition].increment();
  }

  public void backendFailure() {
    backendFailures.increment();
  }

  public void logStartLookupFailed() {
    logStartLookupFailures.increment();
  }

  public void steppedAside(int partitions) {
    steppedAside.set(partitions);
  }

  public void rebalance(String event) {
    rebalances.get(event).increment();
  }

  /** Starts reporting the partition's lag (records not yet applied). */
  public synchronized void owned(int partition) {
    if (lagGauges[partition] == null) {
      lag[partition].set(0);
      lagGauges[partition] =
          Gauge.builder("nolock.ownership.lag", lag[partition], AtomicLong::doubleValue)
              .description("Records on the partition not yet applied, while this instance owns it")
              .tags(base.and(PARTITION_TAG, Integer.toString(partition)))
              .register(registry);
    }
  }

  /** Stops reporting the partition's lag: another instance owns it now. */
  public synchronized void released(int partition) {
    Gauge gauge = lagGauges[partition];
    if (gauge != null) {
      registry.remove(gauge);
      lagGauges[partition] = null;
    }
  }

  public void lag(int partition, long records) {
    lag[partition].set(records);
  }
}
