package dev.nolock.queue;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import io.vavr.control.Option;
import java.time.Instant;
import java.util.Objects;

/**
 * A claimed job: what {@link JobQueue#claim} returns and a {@link JobHandler} receives.
 *
 * <p>The {@link #attempt()} number is the job's <b>attempt token</b>: every claim of the job bumps
 * it in the same statement, so it strictly increases and no two claims of one job share it. {@link
 * JobQueue#complete}, {@link JobQueue#fail}, {@link JobQueue#heartbeat} and {@link
 * JobQueue#release} are all conditional on {@code (id, attempt, state = 'running')}: once the lease
 * expired and another worker claimed the job, this attempt's calls are refused as a {@link
 * StaleAttempt} value. Carry {@code (id, attempt)} into your own side effects to fence them (or
 * write them in {@link JobQueue#completeWith}'s transaction, which does it for you).
 *
 * <p>Immutable. Equality is by {@code (id, attempt)}.
 */
public final class Job<T> {

  private final long id;
  private final String queue;
  private final long attempt;
  private final T payload;
  private final String uniqueKey;
  private final Instant runAt;
  private final Instant enqueuedAt;
  private final Instant lockedUntil;
  private final int failures;
  private final int maxAttempts;
  private final Deadline deadline;

  Job(
      long id,
      String queue,
      long attempt,
      T payload,
      String uniqueKey,
      Instant runAt,
      Instant enqueuedAt,
      Instant lockedUntil,
      int failures,
      int maxAttempts,
      Deadline deadline) {
    this.id = id;
    this.queue = queue;
    this.attempt = attempt;
    this.payload = payload;
    this.uniqueKey = uniqueKey;
    this.runAt = runAt;
    this.enqueuedAt = enqueuedAt;
    this.lockedUntil = lockedUntil;
    this.failures = failures;
    this.maxAttempts = maxAttempts;
    this.deadline = Objects.requireNonNull(deadline, "deadline");
  }

  /** The job's id (the table's identity column). Never use it as a metric tag. */
  public long id() {
    return id;
  }

  /** The queue name. */
  public String queue() {
    return queue;
  }

  /** The attempt token: 1 on the first claim, one more on each claim after. */
  public long attempt() {
    return attempt;
  }

  /** {@link #attempt()} as a {@link FencingToken}, for code that fences with nolock's types. */
  public FencingToken token() {
    return FencingToken.of(attempt);
  }

  public T payload() {
    return payload;
  }

  public Option<String> uniqueKey() {
    return Option.of(uniqueKey);
  }

  /** When the job became due (database clock). */
  public Instant runAt() {
    return runAt;
  }

  /** When the job was enqueued (database clock). */
  public Instant enqueuedAt() {
    return enqueuedAt;
  }

  /** The lease's end on the database's clock, as of the claim or the last heartbeat. */
  public Instant lockedUntil() {
    return lockedUntil;
  }

  /**
   * The lease's end on this process's monotonic clock, counted from before the claim (or heartbeat)
   * was sent, so never later than the database's {@link #lockedUntil()}. Check it before starting
   * expensive work; the attempt token, not this deadline, is what keeps a late finish out.
   */
  public Deadline deadline() {
    return deadline;
  }

  /** Failed attempts so far (since enqueue or the last {@link QueueAdmin#retry}). */
  public int failures() {
    return failures;
  }

  /** Attempts allowed before the job is dead-lettered. */
  public int maxAttempts() {
    return maxAttempts;
  }

  /** True when failing this attempt dead-letters the job. */
  public boolean isLastAttempt() {
    return failures + 1 >= maxAttempts;
  }

  Job<T> withLease(Instant newLockedUntil, Deadline newDeadline) {
    return new Job<>(
        id,
        queue,
        attempt,
        payload,
        uniqueKey,
        runAt,
        enqueuedAt,
        newLockedUntil,
        failures,
        maxAttempts,
        newDeadline);
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Job<?> that && id == that.id && attempt == that.attempt;
  }

  @Override
  public int hashCode() {
    return Long.hashCode(id) * 31 + Long.hashCode(attempt);
  }

  @Override
  public String toString() {
    return "Job[id="
        + id
        + ", queue="
        + queue
        + ", attempt="
        + attempt
        + ", failures="
        + failures
        + "/"
        + maxAttempts
        + ", lockedUntil="
        + lockedUntil
        + "]";
  }
}
