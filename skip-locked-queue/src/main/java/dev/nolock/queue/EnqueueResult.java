package dev.nolock.queue;

import java.util.Objects;

/** What an enqueue did: inserted a job, or found a pending job with the same unique key. */
public sealed interface EnqueueResult {

  /** True when nothing was inserted because of the unique key. */
  default boolean isDuplicate() {
    return this instanceof Duplicate;
  }

  /**
   * The job was inserted (it becomes visible to workers when the enqueueing transaction commits).
   *
   * @param id the new job's id
   */
  record Enqueued(long id) implements EnqueueResult {}

  /**
   * A job with this unique key is already ready or running in this queue (or appeared earlier in
   * the same batch); nothing was inserted.
   *
   * @param uniqueKey the key that was taken
   */
  record Duplicate(String uniqueKey) implements EnqueueResult {
    public Duplicate {
      Objects.requireNonNull(uniqueKey, "uniqueKey");
    }
  }
}
