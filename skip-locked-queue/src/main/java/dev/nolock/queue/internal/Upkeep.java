package dev.nolock.queue.internal;

import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.queue.JobState;
import dev.nolock.queue.PurgeResult;
import dev.nolock.queue.ReadyStats;
import dev.nolock.queue.ReapResult;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantLock;
import org.jooq.DSLContext;
import org.jooq.Record3;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeping the table healthy: its schema, the reaper of expired leases, retention, {@code VACUUM},
 * and the ready backlog behind the gauges. {@link dev.nolock.queue.JobQueue} documents each.
 */
public final class Upkeep {

  private static final Logger LOG = LoggerFactory.getLogger(Upkeep.class);

  private final QueueSql sql;
  private final JobsTable jobs;
  private final AdminSql admin;
  private final String queue;
  private final JobsSchema schema;
  private final ReadySampler sampler = new ReadySampler();

  public Upkeep(QueueSql sql) {
    this.sql = sql;
    this.jobs = sql.jobs();
    this.admin = new AdminSql(jobs);
    this.queue = sql.queue();
    this.schema = new JobsSchema(jobs, sql.config().table());
    sql.metrics()
        .registerGauges(
            sampler,
            s -> s.get().map(r -> (double) r.readyJobs()).orElse(Double.NaN),
            s ->
                s.get()
                    .map(r -> r.oldestReadyAge().map(a -> a.toNanos() / 1e9).getOrElse(0.0))
                    .orElse(Double.NaN));
  }

  /**
   * The DDL in one transaction ({@link JobsSchema#createIfMissing}): an existing table that does
   * not fit is refused, unchanged.
   */
  public void createTableIfMissing() {
    sql.run(
        () -> "creating the jobs table (the user needs CREATE on its schema)",
        () ->
            sql.dsl()
                .transactionResult(
                    cfg -> {
                      schema.createIfMissing(cfg.dsl());
                      return null;
                    }));
  }

  /** Reaps in batches until a batch comes back short. */
  public ReapResult reapExpired() {
    int requeued = 0;
    int dead = 0;
    while (true) {
      List<String> states =
          sql.run(
              () -> "re-queueing jobs with expired leases",
              () ->
                  OwnTransaction.run(
                      sql.dsl(),
                      on -> jobs.reap(on, queue, JobsTable.REAP_BATCH).fetch().into(String.class)));
      for (String s : states) {
        if (JobState.fromSql(s) == JobState.DEAD) {
          dead++;
        } else {
          requeued++;
        }
      }
      if (states.size() < JobsTable.REAP_BATCH) {
        break;
      }
    }
    sql.metrics().reaped(requeued, dead);
    return new ReapResult(requeued, dead);
  }

  /**
   * Deletes finished jobs older than {@code olderThan} (validated by the caller) in batches of at
   * most {@link dev.nolock.queue.QueueConfig#purgeBatchSize()} rows, each its own transaction:
   * completed jobs first, and the rest of a batch that found too few of them goes to cancelled
   * ones, so one loop that stops at the first short batch empties both.
   */
  public PurgeResult purgeFinished(Duration olderThan) {
    if (olderThan == null || olderThan.isNegative()) {
      throw new IllegalArgumentException(
          "olderThan must be zero or more, got "
              + olderThan
              + ": it is the age of the finished"
              + " jobs to delete, e.g. Duration.ofDays(1).");
    }
    long deleted = 0;
    int batches = 0;
    int batch = sql.config().purgeBatchSize();
    while (true) {
      int n =
          sql.run(
              () -> "purging finished jobs older than " + olderThan,
              () ->
                  OwnTransaction.run(
                      sql.dsl(),
                      on -> {
                        int done = jobs.purge(on, queue, olderThan, batch).execute();
                        return done == batch
                            ? done
                            : done
                                + admin
                                    .purgeCancelled(on, queue, olderThan, batch - done)
                                    .execute();
                      }));
      batches++;
      deleted += n;
      if (n < batch) {
        break;
      }
    }
    sql.metrics().purged(deleted);
    return new PurgeResult(deleted, batches);
  }

  /** {@code VACUUM (SKIP_LOCKED)} on a pool connection switched to autocommit for it. */
  public void vacuum() {
    DSLContext dsl = sql.dsl();
    sql.run(
        () ->
            "vacuuming the jobs table (the user must own it, or hold MAINTAIN on it from"
                + " PostgreSQL 16)",
        () ->
            dsl.connectionResult(
                connection -> {
                  boolean autoCommit = connection.getAutoCommit();
                  if (!autoCommit) {
                    connection.setAutoCommit(true);
                  }
                  try {
                    return jobs.vacuum(dsl.configuration().derive(connection).dsl()).execute();
                  } finally {
                    if (!autoCommit) {
                      connection.setAutoCommit(false);
                    }
                  }
                }));
  }

  /** One indexed query for the due backlog. */
  public ReadyStats readyStats() {
    int cap = sql.config().readyCountCap();
    Record3<Integer, OffsetDateTime, OffsetDateTime> row =
        sql.run(
            () -> "reading the ready backlog",
            () ->
                OwnTransaction.run(sql.dsl(), on -> jobs.readyStats(on, queue, cap).fetchSingle()));
    int depth = row.value1();
    Option<Duration> age =
        Option.of(row.value2())
            .map(oldest -> Duration.between(oldest, row.value3()))
            .filter(d -> !d.isNegative());
    return new ReadyStats(depth, depth >= cap, age);
  }

  /** The ready stats for the gauges, re-read at most once per refresh interval. */
  private final class ReadySampler {
    private final ReentrantLock refreshing = new ReentrantLock();
    private volatile ReadyStats last;
    private volatile long lastAt;

    Optional<ReadyStats> get() {
      long now = System.nanoTime();
      if ((last == null || now - lastAt >= sql.config().gaugeRefresh().toNanos())
          && refreshing.tryLock()) {
        try {
          last = readyStats();
          lastAt = now;
        } catch (RuntimeException e) {
          LOG.debug("Queue \"{}\": the ready gauges could not be refreshed", queue, e);
        } finally {
          refreshing.unlock();
        }
      }
      return Optional.ofNullable(last);
    }
  }

  @Override
  public String toString() {
    return "Upkeep[" + Objects.toString(queue) + "]";
  }
}
