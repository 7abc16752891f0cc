package dev.nolock.queue.internal;

import dev.nolock.patterns.Deadline;
import dev.nolock.queue.Job;
import java.time.Instant;

/** Builds a claimed {@link Job} (its constructor is the public package's own). */
@FunctionalInterface
public interface JobFactory<T> {

  /** The claimed job; see {@link Job} for each field. */
  Job<T> job(
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
      Deadline deadline);
}
