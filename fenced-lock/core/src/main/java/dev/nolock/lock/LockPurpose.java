package dev.nolock.lock;

/**
 * Why the caller locks. The two are different products, and using the first for a job of the second
 * is the most common distributed-lock mistake.
 */
public enum LockPurpose {

  /**
   * Duplicate work is harmless: two holders at once waste effort but corrupt nothing (two workers
   * refreshing the same cache entry). The holder gets no fencing duty; {@link HeldLock#lease()} is
   * refused so that the lock cannot be mistaken for one that protects data.
   */
  EFFICIENCY,

  /**
   * Duplicate work corrupts data or double-charges. No TTL lock can promise a single holder (a
   * pause past the lease makes two), so every protected write must carry the lease's fencing token
   * to a resource that checks it ({@code dev.nolock.patterns.sql.Fence}), and the holder checks its
   * point of no return before each write.
   */
  CORRECTNESS
}
