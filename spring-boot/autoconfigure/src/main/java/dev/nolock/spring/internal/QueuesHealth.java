package dev.nolock.spring.internal;

import dev.nolock.queue.JobQueue;
import dev.nolock.queue.ReadyStats;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Health of each queue that has a {@code @JobHandler}, one indicator per queue under {@code
 * nolockQueues}.
 *
 * <ol>
 *   <li>DOWN when the queue's worker pool is not running (not started yet, or closed).
 *   <li>The due backlog is read ({@link JobQueue#readyStats()}, one indexed query); DOWN with the
 *       error when the database cannot answer.
 *   <li>DOWN when the oldest due job has been due longer than {@code
 *       nolock.queue.queues.<name>.health.max-ready-age}: the workers do not keep up, or do not
 *       claim. Not checked when that property is not set.
 *   <li>UP otherwise; the details hold the ready count and the oldest due job's age.
 * </ol>
 */
public final class QueuesHealth implements CompositeHealthContributor {

  private final QueueWorkers workers;
  private final QueueSettings settings;

  public QueuesHealth(QueueWorkers workers, QueueSettings settings) {
    this.workers = workers;
    this.settings = settings;
  }

  @Override
  public HealthContributor getContributor(String name) {
    return indicators().get(name);
  }

  @Override
  public Stream<Entry> stream() {
    return indicators().entrySet().stream().map(e -> new Entry(e.getKey(), e.getValue()));
  }

  // Read per request: the queues are known only once every singleton exists.
  private Map<String, HealthIndicator> indicators() {
    Map<String, HealthIndicator> indicators = new LinkedHashMap<>();
    workers.queues().forEach((name, queue) -> indicators.put(name, () -> health(name, queue)));
    return indicators;
  }

  private Health health(String name, JobQueue<?> queue) {
    if (!workers.isRunning(name)) {
      return Health.down().withDetail("running", false).build();
    }
    ReadyStats stats;
    try {
      stats = queue.readyStats();
    } catch (RuntimeException e) {
      return Health.down(e).withDetail("running", true).build();
    }
    Duration max = settings.maxReadyAge(name);
    Duration oldest = stats.oldestReadyAge().getOrNull();
    boolean late = max != null && oldest != null && oldest.compareTo(max) > 0;
    Health.Builder b = late ? Health.down() : Health.up();
    b.withDetail("running", true)
        .withDetail("readyJobs", stats.readyJobs())
        .withDetail("readyJobsCapped", stats.capped());
    if (oldest != null) {
      b.withDetail("oldestReadyAge", oldest.toString());
    }
    if (max != null) {
      b.withDetail("maxReadyAge", max.toString());
    }
    return b.build();
  }
}
