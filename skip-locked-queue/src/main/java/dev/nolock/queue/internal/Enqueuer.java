package dev.nolock.queue.internal;

import static dev.nolock.patterns.sql.NotificationListener.pgNotify;

import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.queue.EnqueueResult;
import dev.nolock.queue.NewJob;
import dev.nolock.queue.PayloadCodec;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import org.jooq.DSLContext;
import org.jooq.Record2;

/**
 * Enqueueing: inserts jobs in chunks with {@code ON CONFLICT ... DO NOTHING} on the pending unique
 * key, matches the returned rows back to the input, and sends one {@code pg_notify} when a job is
 * due at once.
 */
public final class Enqueuer<T> {

  private final QueueSql sql;
  private final PayloadCodec<T> codec;
  private final int chunk;

  public Enqueuer(QueueSql sql, PayloadCodec<T> codec, int chunk) {
    this.sql = sql;
    if (codec == null) {
      throw new IllegalArgumentException(
          "The payload codec is null: pass e.g. PayloadCodec.utf8() or PayloadCodec.of(encode,"
              + " decode).");
    }
    this.codec = codec;
    this.chunk = chunk;
  }

  /** In a transaction of its own; the message of a failure says whether the outcome is unknown. */
  public List<EnqueueResult> enqueueAll(List<NewJob<T>> jobs) {
    // Set once the inserts ran and jOOQ is about to COMMIT: from then on a failure leaves the
    // outcome unknown, before it nothing can have committed.
    boolean[] committing = new boolean[1];
    return sql.run(
        () ->
            committing[0]
                ? "committing "
                    + jobs.size()
                    + " enqueued job(s): whether they were enqueued is unknown (the COMMIT was"
                    + " sent, its answer did not arrive). A retry enqueues them again: a job with a"
                    + " unique key is a Duplicate while the first is still pending, but once that"
                    + " one finished, or without a key, it becomes a second job that runs again"
                : "enqueueing " + jobs.size() + " job(s); nothing was enqueued",
        () ->
            sql.dsl()
                .transactionResult(
                    cfg -> {
                      List<EnqueueResult> results = insertAndNotify(cfg.dsl(), jobs);
                      committing[0] = true;
                      return results;
                    }));
  }

  /** On the caller's open transaction {@code tx}. */
  public List<EnqueueResult> enqueueAll(DSLContext tx, List<NewJob<T>> jobs) {
    QueueSql.requireCallerContext(tx);
    return sql.run(
        () -> "enqueueing " + jobs.size() + " job(s) in the caller's transaction",
        () -> OwnTransaction.onCallerConnection(tx, sql.dsl(), on -> insertAndNotify(on, jobs)));
  }

  private List<EnqueueResult> insertAndNotify(DSLContext on, List<NewJob<T>> newJobs) {
    Objects.requireNonNull(newJobs, "jobs");
    EnqueueResult[] results = new EnqueueResult[newJobs.size()];
    // A key repeated within the batch is a duplicate of its first occurrence and is not sent, so
    // each key appears at most once per statement and the returned rows match by key.
    List<Integer> toSend = new ArrayList<>(newJobs.size());
    Set<String> keys = new HashSet<>();
    for (int i = 0; i < newJobs.size(); i++) {
      NewJob<T> job = Objects.requireNonNull(newJobs.get(i), "a job in the list is null");
      String key = job.uniqueKey().getOrNull();
      if (key != null && !keys.add(key)) {
        results[i] = new EnqueueResult.Duplicate(key);
      } else {
        toSend.add(i);
      }
    }
    boolean dueNow = false;
    int inserted = 0;
    JobsTable jobs = sql.jobs();
    for (int from = 0; from < toSend.size(); from += chunk) {
      List<Integer> part = toSend.subList(from, Math.min(toSend.size(), from + chunk));
      List<JobsTable.NewRow> rows = new ArrayList<>(part.size());
      for (int i : part) {
        NewJob<T> job = newJobs.get(i);
        rows.add(
            new JobsTable.NewRow(
                codec.encode(job.payload()),
                job.uniqueKey().getOrNull(),
                job.maxAttempts().getOrElse(sql.config().maxAttempts()),
                job.runAt().map(at -> at.atOffset(ZoneOffset.UTC)).getOrNull(),
                job.delay()));
        dueNow |= job.runAt().map(at -> !at.isAfter(Instant.now())).getOrElse(job.delay().isZero());
      }
      Map<String, Long> keyed = new HashMap<>();
      List<Long> unkeyed = new ArrayList<>();
      for (Record2<Long, String> r : jobs.insert(on, sql.queue(), rows).fetch()) {
        if (r.value2() == null) {
          unkeyed.add(r.value1());
        } else {
          keyed.put(r.value2(), r.value1());
        }
      }
      // Identity values are drawn in VALUES order, so the sorted ids of the rows without a key
      // follow their input order (those rows cannot conflict, so none is missing).
      Collections.sort(unkeyed);
      Iterator<Long> nextUnkeyed = unkeyed.iterator();
      for (int i : part) {
        String key = newJobs.get(i).uniqueKey().getOrNull();
        if (key == null) {
          if (!nextUnkeyed.hasNext()) {
            throw new IllegalStateException(
                "A job without a unique key was not inserted into "
                    + jobs
                    + ". This is a bug;"
                    + " please report it.");
          }
          results[i] = new EnqueueResult.Enqueued(nextUnkeyed.next());
        } else {
          Long id = keyed.get(key);
          results[i] =
              id != null ? new EnqueueResult.Enqueued(id) : new EnqueueResult.Duplicate(key);
        }
      }
      inserted += keyed.size() + unkeyed.size();
    }
    if (sql.config().notifyOnEnqueue() && dueNow && inserted > 0) {
      on.select(pgNotify(sql.config().channel(), sql.queue())).execute();
    }
    sql.metrics().enqueued(inserted, newJobs.size() - inserted);
    return List.of(results);
  }
}
