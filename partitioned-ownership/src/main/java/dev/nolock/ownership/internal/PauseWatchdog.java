package dev.nolock.ownership.internal;

import dev.nolock.patterns.LeaseClock;
import java.time.Duration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Tells how long the whole process has run without a pause that could have expired its group
 * session: a daemon thread reads the clock about every {@link #TICK}, and a reading more than
 * {@code TICK + threshold} after the previous one means the process (heartbeat thread included) may
 * have been stopped meanwhile (a GC pause, SIGSTOP, a suspended VM or container).
 *
 * <p>Such a gap is never counted as running time, but only a gap of at least half the session
 * timeout restarts the count. A session expires only when no heartbeat reaches the coordinator for
 * a whole session timeout; while the process runs, the consumer heartbeats at least every heartbeat
 * interval, so only a single pause longer than {@code sessionTimeout - heartbeatInterval} can
 * expire it: two thirds of the session with the classic protocol (the runner sets the interval to a
 * third), 40 of 45 s with the consumer protocol's broker defaults. Half the session covers any
 * heartbeat interval up to half the session. Restarting on every gap instead would keep a process
 * with a 1.5 s GC pause every 30 s and a 45 s session from ever counting a session timeout, though
 * no such pause can expire its session; counting only the time between gaps (never restarting)
 * would let running time from before a session-expiring pause count after it, before the member
 * heard at a heartbeat that it left the group.
 *
 * <p>It measures the process, not the runner's loop: a slow apply or a claim waiting on a row lock
 * keeps the loop busy, but the consumer's heartbeats go on on their own thread, and the watchdog's
 * readings go on too.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>The thread reads {@link LeaseClock#nanoTime()}, then sleeps {@link #TICK} of real time. A
 *       failure of a reading is logged and the thread keeps reading (it must not die silently:
 *       without it, every gap between the caller's readings would count as a pause).
 *   <li>A reading at most {@code TICK + threshold} after the previous one adds the time between
 *       them to the running time.
 *   <li>A later reading adds nothing; if it is at least half the session timeout after the previous
 *       one, the count also restarts there: running time before it no longer counts.
 *   <li>{@link #mark(long)} and {@link #runningSince(long, long)} apply steps 2 and 3 to the
 *       caller's reading too, so a pause that ended before the thread's next reading is seen at
 *       once, whichever thread reads first.
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
   * stay below it and count as running time; a pause this short cannot expire a session on its own
   * (sessions are at least the broker's {@code group.min.session.timeout.ms}, 6 s by default).
   */
  public static final Duration MIN_THRESHOLD = Duration.ofSeconds(1);

  private final LeaseClock clock;
  private final long gapNanos;
  private final long restartNanos;
  private final Thread thread;
  private long lastReadingNanos;
  private long runningNanos;
  private long restartedAtNanos;
  private volatile boolean closed;

  /**
   * @param threshold the overshoot beyond {@link #TICK} taken for a pause; raised to {@link
   *     #MIN_THRESHOLD} if lower
   * @param sessionTimeout the consumer's session timeout: a pause of at least half of it restarts
   *     the count
   */
  public PauseWatchdog(LeaseClock clock, Duration threshold, Duration sessionTimeout, String name) {
    this.clock = clock;
    Duration t = threshold.compareTo(MIN_THRESHOLD) < 0 ? MIN_THRESHOLD : threshold;
    this.gapNanos = TICK.plus(t).toNanos();
    this.restartNanos = sessionTimeout.dividedBy(2).toNanos();
    this.lastReadingNanos = clock.nanoTime();
    this.thread = new Thread(this::run, name);
    thread.setDaemon(true);
  }

  /** Starts the thread. */
  public void start() {
    thread.start();
  }

  /**
   * The running time counted so far, pauses excluded, for a later {@link #runningSince(long,
   * long)}; {@code now} is the caller's reading of the clock.
   */
  public synchronized long mark(long now) {
    read(now);
    return runningNanos;
  }

  /**
   * How long the process has run since {@code mark} (from {@link #mark(long)}), pauses excluded,
   * and only since the last pause that could have expired the session if that came later.
   */
  public synchronized long runningSince(long mark, long now) {
    read(now);
    return runningNanos - Math.max(mark, restartedAtNanos);
  }

  /** One reading of the clock (steps 2 and 3); the thread calls it, a unit test may too. */
  synchronized void tick() {
    read(clock.nanoTime());
  }

  private void read(long now) {
    long gap = now - lastReadingNanos;
    if (gap <= 0) {
      return;
    }
    lastReadingNanos = now;
    // Half the session first: a safety margin near the session makes the pause threshold longer.
    if (gap >= restartNanos) {
      log.debug(
          "No clock reading for {} ms, half the session or more: the process may have been paused"
              + " long enough to leave its group; the running time restarts",
          gap / 1_000_000);
      restartedAtNanos = runningNanos;
    } else if (gap <= gapNanos) {
      runningNanos += gap;
    } else {
      log.debug(
          "No clock reading for {} ms: the process may have been paused; not counted as running",
          gap / 1_000_000);
    }
  }

  private void run() {
    while (!closed) {
      try {
        tick();
      } catch (Throwable e) {
        log.error("The pause watchdog's clock reading failed; it keeps reading", e);
      }
      try {
        // The sleep is the measurement, not a wait for an event: a wake-up much later than TICK
        // is how a pause of the whole process shows (the next reading sees the gap).
        Thread.sleep(TICK.toMillis());
      } catch (InterruptedException e) {
        // close() interrupts; the loop's condition decides
      }
    }
  }

  /** Stops the thread. */
  @Override
  public void close() {
    closed = true;
    thread.interrupt();
  }
}
