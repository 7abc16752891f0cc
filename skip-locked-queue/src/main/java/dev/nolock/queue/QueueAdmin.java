package dev.nolock.queue;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.queue.AdminRefusal.CancelRefusal;
import dev.nolock.queue.AdminRefusal.RescheduleRefusal;
import dev.nolock.queue.AdminRefusal.RetryRefusal;
import dev.nolock.queue.internal.Administration;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Objects;

/**
 * The administration of one queue ({@link JobQueue#admin()}): find a job, cancel or reschedule a
 * ready one, page through the dead letters and retry them.
 *
 * <p>Guarantees:
 *
 * <ul>
 *   <li><b>A claim and a change never both win.</b> Cancel and reschedule are one {@code UPDATE ...
 *       WHERE state = 'ready'}; the claim locks its rows {@code FOR UPDATE SKIP LOCKED}. If the
 *       claim locks the row first, the change waits for it and PostgreSQL re-checks {@code state =
 *       'ready'} on the claimed row, which fails: the answer is a refusal ({@link
 *       AdminRefusal.Running}, {@link AdminRefusal.NotReady}) and the job runs. If the change locks
 *       it first, the claim skips the row, and once the change commits no claim sees it as ready: a
 *       cancelled job never runs. A running job is never reported cancelled.
 *   <li><b>The true outcome after a lost answer.</b> A call whose answer was lost throws {@link
 *       BackendUnavailableException}; sending it again answers what the job shows: a cancel finds
 *       the job {@link JobState#CANCELLED} and answers {@link Cancelled} (only a cancel leaves a
 *       job so), a reschedule finds it ready at the requested time and answers {@link Rescheduled},
 *       a retry finds its dead letter revived (the job is no longer dead at that attempt: only a
 *       revival takes a job out of {@code dead}, and only a claim raises its attempt) and answers
 *       {@link Revived}. Such an answer has {@code byThisCall} false: an earlier call did it, this
 *       caller's lost one or someone else's, and the row cannot tell which. Once retention has
 *       purged a cancelled job, a resent cancel gets {@link AdminRefusal.UnknownJob}.
 *   <li><b>Every refusal is a value</b> ({@link AdminRefusal}, the {@code Left}); only a failure of
 *       PostgreSQL is an exception ({@link BackendUnavailableException} when a retry can get past
 *       it, else {@link IllegalStateException}), and misuse an {@link IllegalArgumentException}.
 *   <li><b>Stable dead-letter pages.</b> Pages are keyset pages in job id order: a job that dies,
 *       or a letter that is retried, while you page never shifts a page, so no letter that was dead
 *       throughout is skipped or listed twice.
 * </ul>
 *
 * <p>Bulk calls ({@link #cancelAll}, {@link #retryAll}, {@link #retryAllDeadLetters}) answer per
 * job, in order, each job in a transaction of its own: one refusal does not hold up the others.
 * Thread-safe.
 *
 * @param <T> the payload type
 */
public final class QueueAdmin<T> {

  /** Most dead letters one page may ask for. */
  public static final int MAX_PAGE = 1_000;

  private final Administration<T> admin;
  private final String queue;

  QueueAdmin(Administration<T> admin, String queue) {
    this.admin = admin;
    this.queue = queue;
  }

  /** The job {@code jobId} of this queue as stored now, in any state; none when unknown. */
  public Option<JobInfo<T>> find(long jobId) {
    return admin.find(jobId);
  }

  /**
   * Cancels the ready job {@code jobId}: it becomes {@link JobState#CANCELLED}, is never claimed,
   * frees its unique key, and is deleted by {@link JobQueue#purgeFinished} like a completed job.
   *
   * <ol>
   *   <li>{@code UPDATE t SET state = 'cancelled', finished_at = clock_timestamp() WHERE queue = :q
   *       AND id = :id AND state = 'ready'}.
   *   <li>When that matched nothing, the job as it is now answers: cancelled already, {@link
   *       Cancelled} with {@code byThisCall} false; running, {@link AdminRefusal.Running}; done or
   *       dead, {@link AdminRefusal.AlreadyFinished}; absent, {@link AdminRefusal.UnknownJob};
   *       ready again (claimed and handed back meanwhile), step 1 once more.
   * </ol>
   *
   * @throws BackendUnavailableException when the outcome is unknown; cancel again to learn it
   */
  public Either<CancelRefusal, Cancelled> cancel(long jobId) {
    return admin.cancel(jobId);
  }

  /** {@link #cancel} for each of {@code jobIds}, each in its own transaction; answers in order. */
  public List<Either<CancelRefusal, Cancelled>> cancelAll(List<Long> jobIds) {
    Objects.requireNonNull(jobIds, "jobIds");
    jobIds.forEach(id -> Objects.requireNonNull(id, "a job id in jobIds is null"));
    return admin.cancelAll(jobIds);
  }

  /**
   * Moves the ready job {@code jobId} to run not before {@code at} (database clock; kept to the
   * microsecond, as PostgreSQL stores it). Earlier or later than its current time, but after the
   * database's clock: a job due now needs no rescheduling.
   *
   * <ol>
   *   <li>{@code UPDATE t SET run_at = :at WHERE queue = :q AND id = :id AND state = 'ready' AND
   *       run_at <> :at AND :at > clock_timestamp()}.
   *   <li>When that matched nothing, the job as it is now answers: absent, {@link
   *       AdminRefusal.UnknownJob}; not ready, {@link AdminRefusal.NotReady}; ready at {@code at}
   *       already (a resend), {@link Rescheduled} with {@code byThisCall} false; {@code at} not
   *       after the database's clock, {@link AdminRefusal.InThePast}; else step 1 once more.
   * </ol>
   *
   * @throws BackendUnavailableException when the outcome is unknown; reschedule again to the same
   *     time to learn it
   */
  public Either<RescheduleRefusal, Rescheduled> reschedule(long jobId, Instant at) {
    Objects.requireNonNull(at, "at");
    return admin.reschedule(jobId, at.truncatedTo(ChronoUnit.MICROS));
  }

  /**
   * The first page of this queue's dead letters, at most {@code limit} (1 to {@value #MAX_PAGE}).
   */
  public DeadLetterPage<T> deadLetters(int limit) {
    return deadLetters(0, limit);
  }

  /**
   * The dead letters after job {@code afterId} ({@link DeadLetterPage#nextAfter()} of the page
   * before), in id order, at most {@code limit} (1 to {@value #MAX_PAGE}). A page reads the primary
   * key from {@code afterId} on until it has {@code limit + 1} dead jobs; no index is kept for dead
   * jobs alone.
   */
  public DeadLetterPage<T> deadLetters(long afterId, int limit) {
    if (limit < 1 || limit > MAX_PAGE) {
      throw new IllegalArgumentException(
          "A dead-letter page holds 1 to " + MAX_PAGE + " jobs, got " + limit);
    }
    return admin.deadLetters(afterId, limit);
  }

  /**
   * Revives the dead letter {@code deadLetter} (as {@link #find} or {@link #deadLetters} returned
   * it): ready again, due now, with a fresh set of attempts (failures restart at zero; the attempt
   * counter keeps increasing, as it is the token).
   *
   * <ol>
   *   <li>{@code UPDATE t SET state = 'ready', failures = 0, run_at = clock_timestamp(), ... WHERE
   *       queue = :q AND id = :id AND attempt = :deadAttempt AND state = 'dead'}. A unique-key
   *       violation (another job with the key is ready or running) is {@link
   *       AdminRefusal.UniqueKeyInUse}.
   *   <li>When that matched nothing: absent, {@link AdminRefusal.UnknownJob}; no longer dead at
   *       that attempt, {@link Revived} with {@code byThisCall} false.
   * </ol>
   *
   * @throws IllegalArgumentException when {@code deadLetter} is not a dead job of this queue
   * @throws BackendUnavailableException when the outcome is unknown; retry again to learn it
   */
  public Either<RetryRefusal, Revived> retry(JobInfo<?> deadLetter) {
    requireDeadLetter(deadLetter);
    return admin.retry(deadLetter);
  }

  /** {@link #retry} for each of {@code deadLetters}, each in its own transaction; in order. */
  public List<Either<RetryRefusal, Revived>> retryAll(List<? extends JobInfo<?>> deadLetters) {
    Objects.requireNonNull(deadLetters, "deadLetters");
    deadLetters.forEach(this::requireDeadLetter);
    return admin.retryAll(deadLetters);
  }

  /**
   * Retries every dead letter of this queue, page by page in id order; one answer per letter it
   * found. Letters that die while it runs are retried when they fall after its position. Resent
   * after a lost answer, it retries what is dead then: the letters the lost call revived are not
   * dead letters any more and are not in its answer (read them with {@link #find}).
   */
  public List<Either<RetryRefusal, Revived>> retryAllDeadLetters() {
    return admin.retryAllDeadLetters();
  }

  private void requireDeadLetter(JobInfo<?> letter) {
    Objects.requireNonNull(letter, "deadLetter");
    if (letter.state() != JobState.DEAD || !letter.queue().equals(queue)) {
      throw new IllegalArgumentException(
          "Job "
              + letter.id()
              + " is "
              + letter.state().sqlValue()
              + " in queue \""
              + letter.queue()
              + "\": retry takes a dead letter of queue \""
              + queue
              + "\" as find or deadLetters returned it.");
    }
  }

  /**
   * The job is cancelled.
   *
   * @param jobId the job
   * @param cancelledAt when it was cancelled (database clock)
   * @param byThisCall true when this call cancelled it; false when an earlier call had (this
   *     caller's own, whose answer was lost, or someone else's)
   */
  public record Cancelled(long jobId, Instant cancelledAt, boolean byThisCall) {
    public Cancelled {
      Objects.requireNonNull(cancelledAt, "cancelledAt");
    }
  }

  /**
   * The job is ready and runs not before {@code runAt}.
   *
   * @param byThisCall false when an earlier call had moved it there
   */
  public record Rescheduled(long jobId, Instant runAt, boolean byThisCall) {
    public Rescheduled {
      Objects.requireNonNull(runAt, "runAt");
    }
  }

  /**
   * The dead letter that attempt {@code deadAttempt} left has been revived.
   *
   * @param byThisCall false when an earlier call had revived it; the job may have run since
   */
  public record Revived(long jobId, long deadAttempt, boolean byThisCall) {}

  /**
   * One page of dead letters.
   *
   * @param letters in id order
   * @param nextAfter the id to pass to {@link #deadLetters(long, int)} for the next page; none when
   *     this page is the last
   */
  public record DeadLetterPage<T>(List<JobInfo<T>> letters, Option<Long> nextAfter) {
    public DeadLetterPage {
      letters = List.copyOf(letters);
      Objects.requireNonNull(nextAfter, "nextAfter");
    }
  }
}
