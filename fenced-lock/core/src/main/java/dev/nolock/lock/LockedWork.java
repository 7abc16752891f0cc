package dev.nolock.lock;

/**
 * The work {@link FencedLock#withLock} runs while it holds a lock. It may throw a checked
 * exception: {@code withLock} releases the lock first and then rethrows it unchanged.
 *
 * @param <T> what the work returns
 * @param <X> the checked exception the work may throw ({@link RuntimeException} when none)
 */
@FunctionalInterface
public interface LockedWork<T, X extends Exception> {

  /** Runs with {@code lock} held; check its point of no return before each protected write. */
  T run(HeldLock lock) throws X;
}
