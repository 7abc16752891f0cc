package dev.nolock.queue;

/**
 * What one reaper pass did with running jobs whose lease had expired.
 *
 * @param requeued jobs returned to ready (their expired attempt counted as a failure)
 * @param deadLettered jobs dead-lettered because that failure was their last allowed attempt
 */
public record ReapResult(int requeued, int deadLettered) {

  /** Jobs reaped in all. */
  public int total() {
    return requeued + deadLettered;
  }
}
