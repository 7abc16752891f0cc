package dev.nolock.patterns;

import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A {@link LeaseClock} that moves only when told to, for tests of lease arithmetic. Thread-safe.
 * {@link #sleep} advances it instead of blocking, so a retry loop under test runs instantly and its
 * waits can be read back from the clock.
 */
public final class ManualLeaseClock implements LeaseClock {

  private final AtomicLong now;

  /** A clock that starts at {@code startNanos}; any value, including ones near overflow. */
  public ManualLeaseClock(long startNanos) {
    this.now = new AtomicLong(startNanos);
  }

  /** A clock that starts at zero. */
  public ManualLeaseClock() {
    this(0L);
  }

  @Override
  public long nanoTime() {
    return now.get();
  }

  @Override
  public void sleep(Duration duration) {
    if (!duration.isNegative()) {
      advance(duration);
    }
  }

  /** Takes a permit if there is one; otherwise advances by {@code duration} instead of blocking. */
  @Override
  public boolean await(Semaphore signal, Duration duration) {
    if (signal.tryAcquire()) {
      return true;
    }
    sleep(duration);
    return false;
  }

  /**
   * Moves the clock forward; a monotonic clock never goes back, so negative durations are refused.
   */
  public ManualLeaseClock advance(Duration duration) {
    if (duration.isNegative()) {
      throw new IllegalArgumentException(
          "A monotonic clock never goes back; advance by zero or more, got " + duration);
    }
    now.addAndGet(duration.toNanos());
    return this;
  }
}
