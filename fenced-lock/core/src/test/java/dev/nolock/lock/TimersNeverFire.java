package dev.nolock.lock;

import dev.nolock.patterns.LeaseClock;
import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A clock whose timers never fire: a backoff sleeps until the thread is interrupted, and a wait for
 * a wake-up ends only with the wake-up. Time itself runs as usual. A waiter on it asks again only
 * when its backend wakes it, so what a test sees of the order and the wake-ups is the backend's
 * doing, not the luck of a jittered backoff.
 */
public final class TimersNeverFire implements LeaseClock {

  private final AtomicInteger waits = new AtomicInteger();

  /** How many waits began: a backoff or a wait for a wake-up. */
  public int waits() {
    return waits.get();
  }

  @Override
  public long nanoTime() {
    return System.nanoTime();
  }

  @Override
  public void sleep(Duration duration) throws InterruptedException {
    waits.incrementAndGet();
    new Semaphore(0).acquire();
  }

  @Override
  public boolean await(Semaphore signal, Duration duration) throws InterruptedException {
    waits.incrementAndGet();
    signal.acquire();
    return true;
  }
}
