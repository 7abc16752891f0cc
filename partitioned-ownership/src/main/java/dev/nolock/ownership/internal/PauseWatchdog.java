package dev.nolock.ownership.internal;

import dev.nolock.patterns.LeaseClock;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells how long the whole process has run without a pause: a daemon thread reads the clock about
 * every {@link #TICK}, and a reading more than {@code TICK + threshold} after the previous one
 * means the process (heartbeat thread included) may have been stopped meanwhile (a GC pause,
 * SIGSTOP, a suspended VM or container); the running time restarts there.
 *
 * <p>It measures the process, not the runner's loop: a slow apply or a claim waiting on a row lock
 * keeps the loop busy, but the consumer's heartbeats go on on their own thread, and the watchdog's
 * readings go on too.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>The thread reads {@link LeaseClock#nanoTime()}, then sleeps {@link #TICK} of real time.
 *   <li>A reading more than {@code TICK + threshold} after the previous reading sets "running
 *       since" to that reading.
 *   <li>{@link #runningSinceNanos(long)} applies step 2 to the caller's reading too, so a pause
 *       that ended before the thread's next reading is seen at once, whichever thread reads first.
 * </ol>
 *
 * <p>A clock that tests move by hand works the same way: a move larger than {@code TICK +
 * threshold} between two readings is a pause.
 */
public final class PauseWatchdog implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(PauseWatchdog.class);

  /** How often the thread reads the clock. */
  public static final Duration TICK = Duration.ofMillis(100);

  /**
   * The least overshoot taken for a pause. Scheduling delays on a busy host and short GC pauses
   * stay below it; a shorter pause cannot expire a session on its own (sessions are at least the
   * broker's {@code group.min.session.timeout.ms}, 6 s by default), and the re-claim timer it
   * protects waits a whole session timeout of running, many heartbeat intervals.
   */
  public static final Duration MIN_THRESHOLD = Duration.ofSeconds(1);

  private final LeaseClock clock;
  private final long gapNanos;
  private final Thread thread;
  private long lastReadingNanos;
  private long runningSinceNanos;
  private volatile boolean closed;

  /**
   * @param threshold the overshoot beyond {@link #TICK} taken for a pause; raised to {@link
   *     #MIN_THRESHOLD} if lower
   */
  public PauseWatchdog(LeaseClock clock, Duration threshold, String name) {
    this.clock = clock;
    Duration t = threshold.compareTo(MIN_THRESHOLD) < 0 ? MIN_THRESHOLD : threshold;
    this.gapNanos = TICK.plus(t).toNanos();
    long now = clock.nanoTime();
    this.lastReadingNanos = now;
    this.runningSinceNanos = now;
    this.thread = new Thread(this::run, name);
    thread.setDaemon(true);
  }

  /** Starts the thread. */
  public void start() {
    thread.start();
  }

  /**
   * When the process last resumed from a possible pause (or the watchdog was created), on the
   * clock; {@code now} is the caller's reading of the same clock.
   */
  public synchronized long runningSinceNanos(long now) {
    read(now);
    return runningSinceNanos;
  }

  /** One reading of the clock (step 2); the thread calls it, a unit test may too. */
  synchronized void tick() {
    read(clock.nanoTime());
  }

  private void read(long now) {
    if (now - lastReadingNanos > gapNanos) {
      log.debug(
          "No clock reading for {} ms: the process may have been paused",
          (now - lastReadingNanos) / 1_000_000);
      runningSinceNanos = now;
    }
    if (now - lastReadingNanos > 0) {
      lastReadingNanos = now;
    }
  }

  private void run() {
    try {
      while (!closed) {
        tick();
        Thread.sleep(TICK.toMillis());
      }
    } catch (InterruptedException e) {
      // closed
    }
  }

  /** Stops the thread. */
  @Override
  public void close() {
    closed = true;
    thread.interrupt();
  }
}
