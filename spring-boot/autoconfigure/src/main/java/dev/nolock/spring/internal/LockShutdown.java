package dev.nolock.spring.internal;

import dev.nolock.lock.FencedLock;
import java.util.Objects;
import org.springframework.context.SmartLifecycle;

/**
 * Closes the application's {@link FencedLock} (releasing every lease it still holds) when the
 * context stops, before the connections the backend needs are gone: Spring Data Redis's {@code
 * LettuceConnectionFactory} shuts its client down in its own lifecycle stop (phase 0), before any
 * bean is destroyed, so a close left to bean destruction would find the Redis connection closed and
 * leave each lease to expire at its TTL. After the stop the lock is closed for good.
 */
public final class LockShutdown implements SmartLifecycle {

  private final FencedLock lock;
  private volatile boolean running;

  public LockShutdown(FencedLock lock) {
    this.lock = Objects.requireNonNull(lock, "lock");
  }

  @Override
  public void start() {
    running = true;
  }

  @Override
  public void stop() {
    lock.close();
    running = false;
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return NolockPhase.PHASE;
  }
}
