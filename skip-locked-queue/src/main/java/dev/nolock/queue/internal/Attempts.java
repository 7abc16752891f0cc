package dev.nolock.queue.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlWork;
import dev.nolock.patterns.sql.WorkThrew;
import dev.nolock.queue.Finished;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobState;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.StaleAttempt;
import dev.nolock.queue.internal.QueueMetrics.Operation;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ThreadLocalRandom;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Claiming and finishing: the claim, and every call conditional on {@code (id, attempt, state =
 * 'running')} (complete, fail, heartbeat, release), each answering a retry after a lost answer as
 * the first call was answered where the row still shows it. {@link dev.nolock.queue.JobQueue}
 * documents the guarantees.
 */
public final class Attempts<T> {

  private static final Logger LOG = LoggerFactory.getLogger(Attempts.class);

  private final QueueSql sql;
  private final PayloadCodec<T> codec;
  private final JobFactory<T> factory;
  private final JobsTable jobs;
  private final String queue;
  private final QueueMetrics metrics;

  public Attempts(QueueSql sql, PayloadCodec<T> codec, JobFactory<T> factory) {
    this.sql = sql;
    this.codec = Objects.requireNonNull(codec, "codec");
    this.factory = Objects.requireNonNull(factory, "factory");
    this.jobs = sql.jobs();
    this.queue = sql.queue();
    this.metrics = sql.metrics();
  }

  // -----------------------------------------------------------------------------------------------
  // Claim

  /** Claims up to {@code max} (validated by the caller) due jobs. */
  public List<Job<T>> claim(int max, int limit) {
    if (max < 1 || max > limit) {
      throw new IllegalArgumentException("claim(max) takes 1 to " + limit + " jobs, got " + max);
    }
    // The lease is counted from just before the statement goes out, after the pool handed over a
    // connection: waiting for the pool does not eat into it, the round trip does.
    long[] sentAt = new long[1];
    long started = System.nanoTime();
    Duration lease = sql.config().lease();
    List<Record> rows =
        sql.run(
            () ->
                "claiming up to "
                    + max
                    + " job(s). Jobs claimed by a lost response stay"
                    + " running until their lease expires and the reaper re-queues them",
            () ->
                OwnTransaction.run(
                    sql.dsl(),
                    on -> {
                      sentAt[0] = sql.config().clock().nanoTime();
                      return sql.claim(on, max, lease).fetch();
                    }));
    Duration latency = Duration.ofNanos(System.nanoTime() - started);
    if (rows.size() > max) {
      throw new IllegalStateException(
          "A claim of at most "
              + max
              + " returned "
              + rows.size()
              + " jobs. This is a bug;"
              + " please report it.");
    }
    Deadline deadline = Deadline.forHolder(sql.config().clock(), sentAt[0], lease);
    List<Job<T>> claimed = new ArrayList<>(rows.size());
    for (Record r : rows) {
      long id = r.get(0, Long.class);
      long attempt = r.get(1, Long.class);
      T payload;
      try {
        payload = codec.decode(r.get(2, byte[].class));
      } catch (RuntimeException | StackOverflowError | LinkageError | AssertionError e) {
        // A recursive decoder overflows on a deeply nested poison payload, an assertion or a
        // missing class fails on one: that job's failure, not the claim's (which committed;
        // thrown on, it would strand the whole batch running).
        // A decoder's message quotes the bytes it could not read: the describer decides.
        String error =
            "the payload could not be decoded: "
                + ErrorDescriber.describe(sql.config().errorDescriber(), e);
        LOG.warn("Job {} of queue \"{}\": {}; failing the attempt", id, queue, error);
        try {
          failAttempt(id, attempt, r.get(7, Integer.class), error);
        } catch (DataAccessException | IllegalStateException failed) {
          // IllegalStateException: the fail matched two rows (a damaged table). Either way the
          // claim's other jobs are returned; this one stays with its lease.
          LOG.warn(
              "Job {} of queue \"{}\": failing the undecodable attempt failed too; the"
                  + " reaper takes it back when its lease expires",
              id,
              queue,
              failed);
        }
        continue;
      }
      claimed.add(
          factory.job(
              id,
              queue,
              attempt,
              payload,
              r.get(3, String.class),
              r.get(4, OffsetDateTime.class).toInstant(),
              r.get(5, OffsetDateTime.class).toInstant(),
              r.get(6, OffsetDateTime.class).toInstant(),
              r.get(7, Integer.class),
              r.get(8, Integer.class),
              deadline));
    }
    claimed.sort(Comparator.comparing(Job<T>::runAt).thenComparingLong(Job::id));
    metrics.claimed(rows.size(), latency);
    return claimed;
  }

  // -----------------------------------------------------------------------------------------------
  // Complete

  /** In a transaction of its own; an earlier completion by this attempt is answered again. */
  public Either<StaleAttempt, Finished> complete(Job<?> job) {
    requireOwn(job);
    return sql.run(
        () ->
            "completing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it completed is unknown: complete it again to learn the outcome, or"
                + " let it run again (at-least-once)",
        () -> {
          Either<StaleAttempt, Finished> answer =
              OwnTransaction.run(sql.dsl(), on -> completeOn(on, job, EarlierCompletion.REPLAY));
          if (answer.isLeft() && answer.getLeft().jobGone()) {
            throw goneUnknown(List.of(job), 0);
          }
          return answer;
        });
  }

  /** On the caller's transaction; an earlier completion by this attempt is a refusal. */
  public Either<StaleAttempt, Finished> complete(DSLContext tx, Job<?> job) {
    QueueSql.requireCallerContext(tx);
    requireOwn(job);
    return sql.run(
        () ->
            "completing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + " in the caller's transaction",
        () ->
            OwnTransaction.onCallerConnection(
                tx, sql.dsl(), on -> completeOn(on, job, EarlierCompletion.REFUSAL)));
  }

  /**
   * The completion first, then {@code writes}, in one transaction; what the writes throw leaves
   * through {@link WorkThrew}, past the translation of the queue's own database failures, so that a
   * failure of theirs (a checked exception, or a constraint of theirs the database enforced) is
   * never reported as the queue's.
   */
  public <R, X extends Exception> Either<StaleAttempt, R> completeWith(
      Job<?> job, SqlWork<? extends R, X> writes) throws X {
    Objects.requireNonNull(writes, "writes");
    requireOwn(job);
    Either<StaleAttempt, R> result;
    try {
      result =
          sql.run(
              () ->
                  "completing job "
                      + job.id()
                      + " attempt "
                      + job.attempt()
                      + " with its"
                      + " writes; whether they committed is unknown",
              () ->
                  sql.dsl()
                      .transactionResult(
                          cfg -> {
                            DSLContext tx = cfg.dsl();
                            if (sql.atMostOne(
                                    sql.complete(tx, job.id(), job.attempt()),
                                    of("completion", job.id(), job.attempt()))
                                .isEmpty()) {
                              return Either.<StaleAttempt, R>left(
                                  sql.staleAttempt(tx, job.id(), job.attempt()));
                            }
                            return Either.<StaleAttempt, R>right(WorkThrew.call(writes, tx));
                          }));
    } catch (WorkThrew threw) {
      throw threw.<X>original();
    }
    if (result.isLeft()) {
      metrics.stale(Operation.COMPLETE);
    } else {
      metrics.completed();
    }
    return result;
  }

  /** The batch form of {@link #complete(Job)}: one statement, one answer per attempt. */
  public List<Either<StaleAttempt, Finished>> completeAll(List<? extends Job<?>> held) {
    Objects.requireNonNull(held, "jobs");
    List<long[]> pairs = new ArrayList<>(held.size());
    for (Job<?> job : held) {
      Objects.requireNonNull(job, "a job in jobs");
      requireOwn(job);
      pairs.add(new long[] {job.id(), job.attempt()});
    }
    if (held.isEmpty()) {
      return List.of();
    }
    List<Either<StaleAttempt, Finished>> answers =
        sql.run(
            () ->
                "completing "
                    + held.size()
                    + " job(s); whether they completed is unknown: complete them again to learn the"
                    + " outcome, or let them run again (at-least-once)",
            () ->
                OwnTransaction.run(
                    sql.dsl(),
                    on -> {
                      Map<Attempt, OffsetDateTime> done =
                          byAttempt(jobs.completeAll(on, queue, pairs).fetch(), "completion");
                      List<Either<StaleAttempt, Finished>> each = new ArrayList<>(held.size());
                      for (Job<?> job : held) {
                        // remove: the same attempt listed twice completes once; the second
                        // answer is the replay of the first
                        OffsetDateTime runAt = done.remove(Attempt.of(job));
                        if (runAt != null) {
                          metrics.completed();
                          each.add(Either.right(finishedNow(job, runAt)));
                        } else {
                          each.add(notCompletedNow(on, job, EarlierCompletion.REPLAY));
                        }
                      }
                      return each;
                    }));
    List<Job<?>> gone = new ArrayList<>();
    for (int i = 0; i < held.size(); i++) {
      if (answers.get(i).isLeft() && answers.get(i).getLeft().jobGone()) {
        gone.add(held.get(i));
      }
    }
    if (!gone.isEmpty()) {
      throw goneUnknown(gone, held.size() - gone.size());
    }
    return answers;
  }

  /**
   * "Unknown" for completions of jobs that no longer exist: retention deletes only finished jobs,
   * and the row that could have said which attempt completed it is gone.
   */
  private BackendUnavailableException goneUnknown(List<Job<?>> gone, int othersAnswered) {
    StringBuilder which = new StringBuilder();
    for (Job<?> job : gone) {
      which.append(which.length() == 0 ? "" : ", ").append(job.id()).append(" attempt ");
      which.append(job.attempt());
    }
    return new BackendUnavailableException(
        "Completing job(s) "
            + which
            + " of queue \""
            + queue
            + "\": the job no longer exists (retention purged it after an attempt completed it, or"
            + " it was deleted), so whether this attempt completed it, in an earlier call whose"
            + " answer was lost, is unknown. This call changed nothing for it; do not expect it"
            + " to run again."
            + (othersAnswered > 0
                ? " The other "
                    + othersAnswered
                    + " job(s) of the batch were completed or answered, and committed: call"
                    + " completeAll again without the missing job(s) for their answers."
                : ""),
        null);
  }

  /** One attempt of one job: what every answer of the queue is keyed by. */
  private record Attempt(long id, long attempt) {
    static Attempt of(Job<?> job) {
      return new Attempt(job.id(), job.attempt());
    }
  }

  /**
   * The rows a statement on many attempts changed, by attempt: each attempt matches one row by the
   * job's key, so one that changed more is a damaged table ({@link QueueSql#atMostOneRow}), never
   * an answer.
   */
  private Map<Attempt, OffsetDateTime> byAttempt(
      List<Record3<Long, Long, OffsetDateTime>> rows, String statement) {
    Map<Attempt, OffsetDateTime> by = new HashMap<>();
    Map<Attempt, Integer> changed = new HashMap<>();
    for (Record3<Long, Long, OffsetDateTime> row : rows) {
      Attempt attempt = new Attempt(row.value1(), row.value2());
      by.put(attempt, row.value3());
      changed.merge(attempt, 1, Integer::sum);
    }
    changed.forEach((a, n) -> sql.atMostOneRow(n, of(statement, a.id(), a.attempt())));
    return by;
  }

  /** How a completion answers when the same attempt completed the job before. */
  private enum EarlierCompletion {
    /** The same {@link Finished} again: the caller's retry of its own committed completion. */
    REPLAY,
    /**
     * A {@link StaleAttempt}: the completion joins the caller's transaction, whose other writes
     * must not commit a second time.
     */
    REFUSAL
  }

  private Either<StaleAttempt, Finished> completeOn(
      DSLContext on, Job<?> job, EarlierCompletion earlier) {
    Optional<OffsetDateTime> runAt =
        sql.atMostOne(
                sql.complete(on, job.id(), job.attempt()),
                of("completion", job.id(), job.attempt()))
            .map(row -> row.get(0, OffsetDateTime.class));
    if (runAt.isPresent()) {
      metrics.completed();
      return Either.right(finishedNow(job, runAt.get()));
    }
    return notCompletedNow(on, job, earlier);
  }

  private static Finished finishedNow(Job<?> job, OffsetDateTime runAt) {
    return new Finished(job.id(), job.attempt(), JobState.DONE, runAt.toInstant());
  }

  /** The answer for an attempt whose completion changed no row: done before, or stale. */
  private Either<StaleAttempt, Finished> notCompletedNow(
      DSLContext on, Job<?> job, EarlierCompletion earlier) {
    Optional<Record3<String, Long, OffsetDateTime>> now =
        jobs.current(on, queue, job.id()).fetchOptional();
    StaleAttempt stale = QueueSql.toStale(job.id(), job.attempt(), now);
    if (stale.completedByThisAttempt() && earlier == EarlierCompletion.REPLAY) {
      // A retried call, or the handler completed in its own transaction: the same answer again.
      return Either.right(
          new Finished(job.id(), job.attempt(), JobState.DONE, now.get().value3().toInstant()));
    }
    if (!(stale.jobGone() && earlier == EarlierCompletion.REPLAY)) {
      // A gone job is no refusal where an earlier completion is replayed: the caller reports it as
      // unknown, which is not counted as stale.
      metrics.stale(Operation.COMPLETE);
    }
    return Either.left(stale);
  }

  // -----------------------------------------------------------------------------------------------
  // Fail, heartbeat, release

  /** Counts a failure: re-queued with a backoff, or dead-lettered after the last attempt. */
  public Either<StaleAttempt, Finished> fail(Job<?> job, String error) {
    requireOwn(job);
    return sql.run(
        () ->
            "failing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it failed is unknown: fail it again to learn the outcome, or let the"
                + " lease expire and the reaper count the failure",
        () -> failAttempt(job.id(), job.attempt(), job.failures(), error));
  }

  private Either<StaleAttempt, Finished> failAttempt(
      long id, long attempt, int failuresBefore, String error) {
    Duration backoff =
        sql.config().backoff().backoff(failuresBefore + 1, ThreadLocalRandom.current());
    return OwnTransaction.run(
        sql.dsl(),
        on -> {
          Optional<Record2<String, OffsetDateTime>> row =
              sql.atMostOne(
                  jobs.fail(on, queue, id, attempt, error, backoff), of("fail", id, attempt));
          if (row.isPresent()) {
            JobState state = JobState.fromSql(row.get().value1());
            metrics.failed(state == JobState.DEAD);
            return Either.right(new Finished(id, attempt, state, row.get().value2().toInstant()));
          }
          // Not running at this attempt: this very fail may have ended it already (a retry
          // after a lost answer), which is answered as the first call was.
          Optional<Record2<String, OffsetDateTime>> failedBefore =
              jobs.failedBy(on, queue, id, attempt, failuresBefore, error).fetchOptional();
          if (failedBefore.isPresent()) {
            return Either.right(
                new Finished(
                    id,
                    attempt,
                    JobState.fromSql(failedBefore.get().value1()),
                    failedBefore.get().value2().toInstant()));
          }
          metrics.stale(Operation.FAIL);
          return Either.left(sql.staleAttempt(on, id, attempt));
        });
  }

  /** Extends an unexpired lease of the running attempt; a compare-and-swap, never a blind bump. */
  public Either<StaleAttempt, Lease> heartbeat(Job<?> job) {
    requireOwn(job);
    long[] sentAt = new long[1];
    Duration lease = sql.config().lease();
    Optional<OffsetDateTime> until =
        sql.run(
            () ->
                "extending the lease of job "
                    + job.id()
                    + " attempt "
                    + job.attempt()
                    + "; treat the lease as ending at its deadline unless a later heartbeat"
                    + " succeeds",
            () ->
                OwnTransaction.run(
                    sql.dsl(),
                    on -> {
                      sentAt[0] = sql.config().clock().nanoTime();
                      return sql.atMostOne(
                              jobs.heartbeat(on, queue, job.id(), job.attempt(), lease),
                              of("heartbeat", job.id(), job.attempt()))
                          .map(Record1::value1);
                    }));
    if (until.isPresent()) {
      metrics.coordination().renewed();
      return Either.right(
          new Lease(
              until.get().toInstant(), Deadline.forHolder(sql.config().clock(), sentAt[0], lease)));
    }
    metrics.coordination().renewalFailed();
    metrics.stale(Operation.HEARTBEAT);
    return Either.left(
        sql.run(
            () -> "reading job " + job.id() + " after a refused heartbeat",
            () ->
                OwnTransaction.run(
                    sql.dsl(), on -> sql.staleAttempt(on, job.id(), job.attempt()))));
  }

  /**
   * Extends the leases of many held jobs in one statement that never waits for a row lock; one
   * answer per job, in order, empty when stale, expired or locked at that instant. Counts nothing:
   * the caller knows which misses matter.
   */
  public List<Option<Lease>> heartbeatAll(List<? extends Job<?>> held) {
    if (held.isEmpty()) {
      return List.of();
    }
    List<long[]> pairs = new ArrayList<>(held.size());
    held.forEach(job -> pairs.add(new long[] {job.id(), job.attempt()}));
    long[] sentAt = new long[1];
    Duration lease = sql.config().lease();
    List<Record3<Long, Long, OffsetDateTime>> rows =
        sql.run(
            () ->
                "extending the lease of "
                    + held.size()
                    + " job(s); treat each lease as ending"
                    + " at its deadline unless a later heartbeat succeeds",
            () ->
                OwnTransaction.run(
                    sql.dsl(),
                    on -> {
                      sentAt[0] = sql.config().clock().nanoTime();
                      return jobs.heartbeatWithoutWaiting(on, queue, pairs, lease).fetch();
                    }));
    Deadline deadline = Deadline.forHolder(sql.config().clock(), sentAt[0], lease);
    Map<Attempt, OffsetDateTime> until = byAttempt(rows, "heartbeat");
    List<Option<Lease>> answers = new ArrayList<>(held.size());
    for (Job<?> job : held) {
      answers.add(
          Option.of(until.get(Attempt.of(job)))
              .map(lockedUntil -> new Lease(lockedUntil.toInstant(), deadline)));
    }
    return answers;
  }

  /** Hands the job back unrun, at its old place, without counting a failure. */
  public Either<StaleAttempt, Finished> release(Job<?> job) {
    requireOwn(job);
    return sql.run(
        () ->
            "releasing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it was handed back is unknown: release it again to learn the"
                + " outcome, or let the reaper take it back when the lease expires",
        () ->
            OwnTransaction.run(
                sql.dsl(),
                on -> {
                  Optional<OffsetDateTime> runAt =
                      sql.atMostOne(
                              jobs.release(on, queue, job.id(), job.attempt()),
                              of("release", job.id(), job.attempt()))
                          .map(Record1::value1);
                  if (runAt.isPresent()) {
                    metrics.released();
                  } else {
                    // Not running at this attempt: this very release may have ended it already
                    // (a retry after a lost answer), which is answered as the first call was.
                    runAt =
                        jobs.releasedBy(
                                on,
                                queue,
                                job.id(),
                                job.attempt(),
                                job.failures(),
                                job.runAt().atOffset(ZoneOffset.UTC))
                            .fetchOptional(jobs.runAt);
                  }
                  if (runAt.isEmpty()) {
                    metrics.stale(Operation.RELEASE);
                    return Either.left(sql.staleAttempt(on, job.id(), job.attempt()));
                  }
                  return Either.right(
                      new Finished(
                          job.id(), job.attempt(), JobState.READY, runAt.get().toInstant()));
                }));
  }

  /**
   * Renders the statements a worker uses, without sending them. jOOQ's first rendering in a JVM
   * loads and initialises much of jOOQ (over 4 s measured in a cold, C1-only 128 MB JVM on a busy
   * 2-core machine); done inside a claim, that time would count against the lease of every job in
   * the first batch.
   */
  public void warmUp() {
    DSLContext dsl = sql.dsl();
    Duration lease = sql.config().lease();
    List<long[]> pair = List.<long[]>of(new long[] {1, 1});
    sql.claim(dsl, 1, lease).getSQL();
    sql.complete(dsl, 1, 1).getSQL();
    jobs.fail(dsl, queue, 1, 1, "", Duration.ZERO).getSQL();
    jobs.release(dsl, queue, 1, 1).getSQL();
    jobs.heartbeatWithoutWaiting(dsl, queue, pair, lease).getSQL();
    jobs.reap(dsl, queue, 1).getSQL();
  }

  /** Names a statement on one attempt in a message: {@code "fail of job 5 attempt 2"}. */
  private static String of(String statement, long id, long attempt) {
    return statement + " of job " + id + " attempt " + attempt;
  }

  private void requireOwn(Job<?> job) {
    Objects.requireNonNull(job, "job");
    if (!job.queue().equals(queue)) {
      throw new IllegalArgumentException(
          "Job "
              + job.id()
              + " belongs to queue \""
              + job.queue()
              + "\", not \""
              + queue
              + "\": finish it through the JobQueue that claimed it.");
    }
  }
}
