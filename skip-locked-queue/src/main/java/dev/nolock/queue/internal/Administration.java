package dev.nolock.queue.internal;

import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.queue.AdminRefusal;
import dev.nolock.queue.AdminRefusal.CancelRefusal;
import dev.nolock.queue.AdminRefusal.RescheduleRefusal;
import dev.nolock.queue.AdminRefusal.RetryRefusal;
import dev.nolock.queue.JobInfo;
import dev.nolock.queue.JobState;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueAdmin.Cancelled;
import dev.nolock.queue.QueueAdmin.DeadLetterPage;
import dev.nolock.queue.QueueAdmin.Rescheduled;
import dev.nolock.queue.QueueAdmin.Revived;
import io.vavr.control.Either;
import io.vavr.control.Option;
import io.vavr.control.Try;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.exception.DataAccessException;

/**
 * Administration: look-ups, cancel, reschedule, dead letters and their retry. Each change is one
 * conditional statement in a transaction of its own; when it matches nothing, the job's row as it
 * is now decides the answer, so a call resent after its answer was lost reports what the first one
 * did (the row shows it) rather than a refusal. {@link dev.nolock.queue.QueueAdmin} documents the
 * guarantees.
 */
public final class Administration<T> {

  /** Dead letters per page when {@link #retryAllDeadLetters} walks them all. */
  public static final int RETRY_ALL_PAGE = 500;

  private final QueueSql sql;
  private final PayloadCodec<T> codec;
  private final JobsTable jobs;
  private final AdminSql admin;
  private final String queue;

  public Administration(QueueSql sql, PayloadCodec<T> codec) {
    this.sql = sql;
    this.codec = codec;
    this.jobs = sql.jobs();
    this.admin = new AdminSql(jobs);
    this.queue = sql.queue();
  }

  public Option<JobInfo<T>> find(long jobId) {
    return sql.run(
        () -> "reading job " + jobId,
        () ->
            Option.ofOptional(
                OwnTransaction.run(
                    sql.dsl(),
                    on -> admin.find(on, queue, jobId).fetchOptional().map(this::info))));
  }

  public Either<CancelRefusal, Cancelled> cancel(long jobId) {
    return sql.run(
        () ->
            "cancelling job "
                + jobId
                + "; whether it was cancelled is unknown: cancel it again, which answers"
                + " Cancelled if this call cancelled it",
        () -> OwnTransaction.run(sql.dsl(), on -> cancelOn(on, jobId)));
  }

  private Either<CancelRefusal, Cancelled> cancelOn(DSLContext on, long jobId) {
    while (true) {
      Optional<OffsetDateTime> at =
          sql.atMostOne(admin.cancel(on, queue, jobId), "cancel of job " + jobId)
              .map(Record1::value1);
      if (at.isPresent()) {
        return Either.right(new Cancelled(jobId, at.get().toInstant(), true));
      }
      Optional<? extends Record> now = admin.current(on, queue, jobId).fetchOptional();
      if (now.isEmpty()) {
        return Either.left(new AdminRefusal.UnknownJob(jobId));
      }
      JobState state = JobState.fromSql(now.get().get(jobs.state));
      switch (state) {
        case CANCELLED:
          // Only a cancel leaves a job cancelled: an earlier call did, perhaps this caller's own
          // whose answer was lost. The job is cancelled, which is what the caller asked.
          return Either.right(
              new Cancelled(jobId, now.get().get(jobs.finishedAt).toInstant(), false));
        case RUNNING:
          return Either.left(new AdminRefusal.Running(jobId, now.get().get(jobs.attempt)));
        case DONE:
        case DEAD:
          return Either.left(new AdminRefusal.AlreadyFinished(jobId, state));
        case READY:
        default:
          // The cancel met the job claimed, and it was handed back before this read: try again.
          // Each round needs a claim and a hand-back in between, so this ends.
          break;
      }
    }
  }

  public List<Either<CancelRefusal, Cancelled>> cancelAll(List<Long> jobIds) {
    List<Either<CancelRefusal, Cancelled>> answers = new ArrayList<>(jobIds.size());
    for (long id : jobIds) {
      answers.add(cancel(id));
    }
    return answers;
  }

  /** {@code at} is already truncated to what the column stores (microseconds). */
  public Either<RescheduleRefusal, Rescheduled> reschedule(long jobId, Instant at) {
    OffsetDateTime when = at.atOffset(ZoneOffset.UTC);
    return sql.run(
        () ->
            "rescheduling job "
                + jobId
                + " to "
                + at
                + "; whether it was rescheduled is unknown: reschedule it again to the same time,"
                + " which answers Rescheduled if this call moved it",
        () ->
            OwnTransaction.run(
                sql.dsl(),
                on -> {
                  while (true) {
                    Optional<OffsetDateTime> runAt =
                        sql.atMostOne(
                                admin.reschedule(on, queue, jobId, when),
                                "reschedule of job " + jobId)
                            .map(Record1::value1);
                    if (runAt.isPresent()) {
                      return Either.right(new Rescheduled(jobId, runAt.get().toInstant(), true));
                    }
                    Optional<? extends Record> now =
                        admin.current(on, queue, jobId).fetchOptional();
                    if (now.isEmpty()) {
                      return Either.left(new AdminRefusal.UnknownJob(jobId));
                    }
                    JobState state = JobState.fromSql(now.get().get(jobs.state));
                    if (state != JobState.READY) {
                      return Either.left(new AdminRefusal.NotReady(jobId, state));
                    }
                    Instant stored = now.get().get(jobs.runAt).toInstant();
                    if (stored.equals(at)) {
                      // Ready at the requested time: an earlier call moved it (a resend after a
                      // lost answer finds it so, also once the time has passed).
                      return Either.right(new Rescheduled(jobId, stored, false));
                    }
                    Instant dbNow = now.get().get(4, OffsetDateTime.class).toInstant();
                    if (!at.isAfter(dbNow)) {
                      return Either.left(new AdminRefusal.InThePast(jobId, at, dbNow));
                    }
                    // Ready, the time still ahead, yet not matched: the job was claimed and
                    // handed back between the two statements. Try again.
                  }
                }));
  }

  public DeadLetterPage<T> deadLetters(long afterId, int limit) {
    List<JobInfo<T>> letters =
        sql.run(
            () -> "reading dead letters after job " + afterId,
            () ->
                OwnTransaction.run(
                    sql.dsl(),
                    on ->
                        admin.deadLetters(on, queue, afterId, limit + 1).fetch().map(this::info)));
    if (letters.size() > limit) {
      List<JobInfo<T>> page = List.copyOf(letters.subList(0, limit));
      return new DeadLetterPage<>(page, Option.some(page.get(limit - 1).id()));
    }
    return new DeadLetterPage<>(List.copyOf(letters), Option.none());
  }

  public Either<RetryRefusal, Revived> retry(JobInfo<?> letter) {
    long jobId = letter.id();
    long attempt = letter.attempt();
    return sql.run(
        () ->
            "retrying dead job "
                + jobId
                + " (dead at attempt "
                + attempt
                + "); whether it was revived is unknown: retry it again, which answers Revived if"
                + " this call revived it",
        () -> {
          while (true) {
            Optional<OffsetDateTime> runAt;
            try {
              runAt =
                  OwnTransaction.run(
                      sql.dsl(),
                      on ->
                          sql.atMostOne(
                                  admin.retry(on, queue, jobId, attempt),
                                  "retry of dead job " + jobId + " attempt " + attempt)
                              .map(Record1::value1));
            } catch (DataAccessException e) {
              if (!SqlErrors.isUniqueViolation(e)) {
                throw e;
              }
              String key = letter.uniqueKey().getOrElse("");
              Option<Long> holder =
                  Option.ofOptional(
                      OwnTransaction.run(
                          sql.dsl(), on -> admin.keyHolder(on, queue, key).fetchOptional(jobs.id)));
              return Either.left(new AdminRefusal.UniqueKeyInUse(jobId, key, holder));
            }
            if (runAt.isPresent()) {
              return Either.right(new Revived(jobId, attempt, true));
            }
            Optional<? extends Record> now =
                OwnTransaction.run(
                    sql.dsl(), on -> admin.current(on, queue, jobId).fetchOptional());
            if (now.isEmpty()) {
              return Either.left(new AdminRefusal.UnknownJob(jobId));
            }
            long current = now.get().get(jobs.attempt);
            JobState state = JobState.fromSql(now.get().get(jobs.state));
            if (current < attempt) {
              throw new IllegalArgumentException(
                  "Job "
                      + jobId
                      + " never reached attempt "
                      + attempt
                      + " (it is at "
                      + current
                      + "): pass a dead letter as find or deadLetters returned it.");
            }
            if (current > attempt || state != JobState.DEAD) {
              // Only a revival takes a job out of dead, and only a claim raises its attempt: the
              // dead letter of this attempt was revived, by an earlier call (perhaps this
              // caller's own, whose answer was lost) or by someone else.
              return Either.right(new Revived(jobId, attempt, false));
            }
            // Dead at this very attempt, yet the revival matched nothing: it was revived and
            // died again between the two statements cannot be (that takes a claim); read again.
          }
        });
  }

  public List<Either<RetryRefusal, Revived>> retryAll(List<? extends JobInfo<?>> letters) {
    List<Either<RetryRefusal, Revived>> answers = new ArrayList<>(letters.size());
    for (JobInfo<?> letter : letters) {
      answers.add(retry(letter));
    }
    return answers;
  }

  public List<Either<RetryRefusal, Revived>> retryAllDeadLetters() {
    List<Either<RetryRefusal, Revived>> answers = new ArrayList<>();
    long after = 0;
    while (true) {
      DeadLetterPage<T> page = deadLetters(after, RETRY_ALL_PAGE);
      answers.addAll(retryAll(page.letters()));
      if (page.nextAfter().isEmpty()) {
        return answers;
      }
      after = page.nextAfter().get();
    }
  }

  private JobInfo<T> info(Record r) {
    byte[] bytes = r.get(jobs.payload);
    return new JobInfo<>(
        r.get(jobs.id),
        queue,
        JobState.fromSql(r.get(jobs.state)),
        r.get(jobs.attempt),
        r.get(jobs.failures),
        r.get(jobs.maxAttempts),
        r.get(jobs.runAt).toInstant(),
        r.get(jobs.enqueuedAt).toInstant(),
        Option.of(r.get(jobs.lockedUntil)).map(OffsetDateTime::toInstant),
        Option.of(r.get(jobs.finishedAt)).map(OffsetDateTime::toInstant),
        Option.of(r.get(jobs.uniqueKey)),
        Option.of(r.get(jobs.lastError)),
        Try.of(() -> codec.decode(bytes)));
  }
}
