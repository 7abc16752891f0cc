package dev.nolock.spring.internal;

import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.WorkerConfig;
import dev.nolock.spring.autoconfigure.NolockQueueProperties;
import io.micrometer.core.instrument.MeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;

/**
 * {@code nolock.queue.*} turned into the library's settings, every configured value passed through
 * the library's builders when this is made, so a bad value fails start-up; the builder's message is
 * prefixed with the property's name.
 */
public final class QueueSettings {

  private static final String PREFIX = "nolock.queue.queues.";

  private final NolockQueueProperties properties;
  private final MeterRegistry meters;

  /**
   * @param meters where each queue's meters go, tagged with the queue's name; null for none
   */
  public QueueSettings(NolockQueueProperties properties, MeterRegistry meters) {
    this.properties = properties;
    this.meters = meters;
    // The table is checked even when no queue is configured: queues named in code use it too.
    set("nolock.queue.table", properties.getTable(), QueueConfig.custom("any")::table);
    for (String name : properties.getQueues().keySet()) {
      queueConfig(name);
      workerConfig(name);
      Duration maxReadyAge = maxReadyAge(name);
      if (maxReadyAge != null && (maxReadyAge.isZero() || maxReadyAge.isNegative())) {
        throw new IllegalArgumentException(
            PREFIX + name + ".health.max-ready-age: must be positive, was " + maxReadyAge);
      }
    }
  }

  /**
   * The queue's settings.
   *
   * @throws IllegalArgumentException naming the property, or the queue name, that was refused
   */
  public QueueConfig queueConfig(String name) {
    NolockQueueProperties.Queue q = queue(name);
    // A name from the properties is named by its key; one from code is named by its caller.
    QueueConfig.Builder b =
        q == null ? QueueConfig.custom(name) : apply(PREFIX + name, name, QueueConfig::custom);
    set("nolock.queue.table", properties.getTable(), b::table);
    if (meters != null) {
      b.metrics(meters, name);
    }
    if (q == null) {
      return b.build();
    }
    String p = PREFIX + name + ".";
    set(p + "lease", q.getLease(), b::lease);
    set(p + "max-attempts", q.getMaxAttempts(), b::maxAttempts);
    if (q.getBackoffBase() != null || q.getBackoffMax() != null) {
      String which = q.getBackoffBase() != null ? "backoff-base" : "backoff-max";
      set(
          p + which,
          q,
          x ->
              b.backoff(
                  x.getBackoffBase() != null
                      ? x.getBackoffBase()
                      : QueueConfig.DEFAULT_BACKOFF_BASE,
                  x.getBackoffMax() != null ? x.getBackoffMax() : QueueConfig.DEFAULT_BACKOFF_MAX));
    }
    set(p + "query-timeout", q.getQueryTimeout(), b::queryTimeout);
    set(p + "notify-on-enqueue", q.getNotifyOnEnqueue(), b::notifyOnEnqueue);
    return b.build();
  }

  /**
   * The settings of the queue's worker pool.
   *
   * @throws IllegalArgumentException naming the property that was refused
   */
  public WorkerConfig workerConfig(String name) {
    WorkerConfig.Builder b = WorkerConfig.custom();
    NolockQueueProperties.Queue q = queue(name);
    if (q == null) {
      return b.build();
    }
    String p = PREFIX + name + ".";
    set(p + "concurrency", q.getConcurrency(), b::concurrency);
    set(p + "batch-size", q.getBatchSize(), b::batchSize);
    set(p + "claims-in-flight", q.getClaimsInFlight(), b::claimsInFlight);
    set(p + "poll-interval", q.getPollInterval(), b::pollInterval);
    set(p + "listen", q.getListen(), b::listen);
    set(p + "heartbeat-interval", q.getHeartbeatInterval(), b::heartbeatInterval);
    set(p + "reap-interval", q.getReapInterval(), b::reapInterval);
    set(p + "vacuum-interval", q.getVacuumInterval(), b::vacuumInterval);
    set(p + "shutdown-timeout", q.getShutdownTimeout(), b::shutdownTimeout);
    return b.build();
  }

  /** {@code nolock.queue.queues.<name>.health.max-ready-age}; null when not set. */
  public Duration maxReadyAge(String name) {
    NolockQueueProperties.Queue q = queue(name);
    return q == null ? null : q.getHealth().getMaxReadyAge();
  }

  private NolockQueueProperties.Queue queue(String name) {
    Map<String, NolockQueueProperties.Queue> queues = properties.getQueues();
    return queues == null ? null : queues.get(name);
  }

  private static <V> void set(String property, V value, Consumer<V> setter) {
    if (value != null) {
      apply(
          property,
          value,
          v -> {
            setter.accept(v);
            return null;
          });
    }
  }

  private static <V, R> R apply(String property, V value, Function<V, R> setter) {
    try {
      return setter.apply(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(property + ": " + e.getMessage(), e);
    }
  }
}
