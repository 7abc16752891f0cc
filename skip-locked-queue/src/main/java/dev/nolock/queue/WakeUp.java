package dev.nolock.queue;

/** How a {@link WorkerPool} learns that new jobs arrived. */
public enum WakeUp {
  /** The LISTEN connection is being opened and its self-test notification is on its way. */
  STARTING,
  /**
   * LISTEN works: the self-test notification arrived, so enqueues wake the pool within
   * milliseconds; it still polls every {@link WorkerConfig#pollInterval()} for delayed jobs.
   */
  LISTENING,
  /**
   * Polling only, every {@link WorkerConfig#pollInterval()}: listening is off, its connection is
   * down (it is retried), or the self-test notification never arrived, which is what LISTEN through
   * PgBouncer in transaction pooling looks like (then it is not retried).
   */
  POLLING
}
