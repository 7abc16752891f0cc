package dev.nolock.queue;

import io.vavr.control.Option;
import io.vavr.control.Try;
import java.time.Instant;
import java.util.Objects;

/**
 * A job as stored, in any state: what {@link QueueAdmin#find} and the dead-letter pages return. A
 * snapshot read in one statement; the job may have moved on since.
 *
 * @param id the job's id
 * @param queue the queue name
 * @param state its state when read
 * @param attempt its attempt token when read (0 before its first claim)
 * @param failures failed attempts since enqueue or the last revival
 * @param maxAttempts attempts allowed before it is dead-lettered
 * @param runAt not before (database clock)
 * @param enqueuedAt when it was enqueued (database clock)
 * @param lockedUntil the lease's end while running
 * @param finishedAt when it was completed, dead-lettered or cancelled
 * @param uniqueKey its unique key, if any
 * @param lastError the last failure's error, if any
 * @param payload the payload decoded by the queue's codec, or the codec's exception
 */
public record JobInfo<T>(
    long id,
    String queue,
    JobState state,
    long attempt,
    int failures,
    int maxAttempts,
    Instant runAt,
    Instant enqueuedAt,
    Option<Instant> lockedUntil,
    Option<Instant> finishedAt,
    Option<String> uniqueKey,
    Option<String> lastError,
    Try<T> payload) {

  public JobInfo {
    Objects.requireNonNull(queue, "queue");
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(runAt, "runAt");
    Objects.requireNonNull(enqueuedAt, "enqueuedAt");
    Objects.requireNonNull(lockedUntil, "lockedUntil");
    Objects.requireNonNull(finishedAt, "finishedAt");
    Objects.requireNonNull(uniqueKey, "uniqueKey");
    Objects.requireNonNull(lastError, "lastError");
    Objects.requireNonNull(payload, "payload");
  }
}
