package dev.nolock.queue;

/** What {@link JobQueue#retryDead} did. */
public enum RetryDeadOutcome {
  /** The dead job is ready again, due now, with a fresh set of attempts. */
  REQUEUED,
  /**
   * The job exists but is not dead: it was revived already (by anyone, including an earlier call of
   * this caller whose answer was lost: the row keeps no trace of who revived it), or never died.
   * This call changed nothing.
   */
  NOT_DEAD,
  /** No job with that id in this queue (never existed, or purged). */
  NOT_FOUND,
  /**
   * The job is dead but another job with its unique key is ready or running now; nothing changed.
   * Wait for that job, or enqueue without the key.
   */
  UNIQUE_KEY_IN_USE
}
