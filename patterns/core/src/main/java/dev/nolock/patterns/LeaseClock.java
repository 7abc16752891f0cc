package dev.nolock.patterns;

import java.time.Duration;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * The time source for leases: a monotonic counter in nanoseconds, injected per instance so that
 * tests can drive it ({@link ManualLeaseClock}); never a global.
 *
 * <h2>Why not the wall clock</h2>
 *
 * {@link System#currentTimeMillis()} and {@link java.time.Instant#now()} follow NTP: they step
 * backwards and forwards, and two machines never agree on them. A lease measured on the wall clock
 * grows or shrinks with every correction, and comparing a timestamp written by one machine with the
 * clock of another adds both machines' errors. A lease is therefore a <em>duration</em> measured on
 * one machine's monotonic clock, from a moment that machine observed itself; only the server that
 * stores the lease decides expiry on its own clock (PostgreSQL's {@code clock_timestamp()}, Redis's
 * {@code PX}).
 *
 * <h2>Which moment to count from: the safe side differs for holder and contender</h2>
 *
 * <ul>
 *   <li>A <b>holder</b> counts its lease from the instant <em>before</em> it sent the acquiring (or
 *       renewing) request. The server started the lease somewhere within the round trip, so
 *       counting from the send makes the holder believe its lease ends a little <em>earlier</em>
 *       than it does: the whole round trip is subtracted. See {@link Deadline#forHolder}.
 *   <li>A <b>contender</b> waiting out someone else's lease counts from the instant its read of the
 *       lease <em>returned</em>, and waits the duration stored with the lease (not its own
 *       setting). The holder may have renewed just before the read was served, so counting from the
 *       return makes the contender believe the lease ends a little <em>later</em> than it does. See
 *       {@link Deadline#forContender}. Each side errs towards "the lease is still held".
 * </ul>
 *
 * <h2>What pauses and suspends do to {@link System#nanoTime()}</h2>
 *
 * On Linux the JVM reads {@code CLOCK_MONOTONIC}. It keeps running while a process is stopped by
 * SIGSTOP, descheduled by cgroup throttling or frozen in a GC pause, so a holder that checks its
 * {@link Deadline} after waking sees the time it lost and stops itself. It does <em>not</em>
 * advance while the whole machine is suspended (a laptop's sleep, a suspended or live-migrated VM,
 * depending on the hypervisor's clock source); {@code CLOCK_BOOTTIME} would, but the JVM offers no
 * portable way to read it. After a suspend a holder can therefore believe it still has time left
 * while the server has already expired its lease and granted it to someone else. No clock closes
 * that gap, and none closes the one between a passed check and the write that follows it: that is
 * why correctness needs the {@code dev.nolock.patterns.sql.Fence} at the resource, and why {@link
 * Deadline#checkPointOfNoReturn} only reduces how often the fence has to act.
 */
@FunctionalInterface
public interface LeaseClock {

  /** The monotonic time in nanoseconds; only differences between two readings mean anything. */
  long nanoTime();

  /**
   * Waits for {@code duration} on this clock. Used for backoff between attempts; a {@link
   * ManualLeaseClock} advances instead of blocking.
   */
  default void sleep(Duration duration) throws InterruptedException {
    if (!duration.isNegative() && !duration.isZero()) {
      // Backoff between attempts must yield the CPU; a sleep is the point here, not a
      // synchronisation.
      Thread.sleep(duration.toMillis(), duration.toNanosPart() % 1_000_000);
    }
  }

  /**
   * Waits until {@code signal} has a permit, taking it, or until {@code duration} has passed on
   * this clock. Used by a waiter that a backend can wake; a {@link ManualLeaseClock} advances
   * instead of blocking.
   *
   * @return true when signalled, false when the time ran out
   */
  default boolean await(Semaphore signal, Duration duration) throws InterruptedException {
    return signal.tryAcquire(Math.max(0, duration.toNanos()), TimeUnit.NANOSECONDS);
  }

  /** The JVM's monotonic clock ({@link System#nanoTime()}). */
  static LeaseClock system() {
    return System::nanoTime;
  }
}
