package dev.nolock.patterns;

import java.time.Duration;
import java.util.Objects;

/**
 * When a lease ends, as seen from one process, measured on its {@link LeaseClock}.
 *
 * <p>Guarantee: a holder's deadline is never later than the server's expiry of the same lease, as
 * long as the two clocks run at the same rate; a contender's deadline is never earlier than the end
 * of the lease it observed. Both err towards "still held" (see {@link LeaseClock} for why the two
 * sides count from different moments, and for what a suspended machine does to the clock).
 *
 * <p>Algorithm for a protected write:
 *
 * <ol>
 *   <li>Read the clock, then send the acquire or renew request; on success build {@link
 *       #forHolder(LeaseClock, long, Duration)} from that first reading.
 *   <li>Immediately before each protected write, call {@link #checkPointOfNoReturn(Duration,
 *       Duration)}: it throws {@link LeaseLostException} unless {@code remaining - safetyMargin >
 *       expectedWriteTime}.
 *   <li>Send the write with the lease's {@link FencingToken}; the resource's {@code
 *       dev.nolock.patterns.sql.Fence} refuses it if a pause landed between step 2 and the write
 *       and someone else took over meanwhile.
 * </ol>
 *
 * <p>Immutable and thread-safe. Arithmetic is done on differences of {@code nanoTime} readings, so
 * it is correct across the counter's overflow.
 */
public final class Deadline {

  /**
   * Longer leases are refused: they overflow nothing, but they are almost always a unit mistake.
   */
  public static final Duration MAX_LEASE_DURATION = Duration.ofDays(7);

  private final LeaseClock clock;
  private final long startNanos;
  private final Duration leaseDuration;
  private final long durationNanos;

  private Deadline(LeaseClock clock, long startNanos, Duration leaseDuration) {
    this.clock = Objects.requireNonNull(clock, "clock");
    this.leaseDuration = requireLeaseDuration(leaseDuration);
    this.startNanos = startNanos;
    this.durationNanos = leaseDuration.toNanos();
  }

  /**
   * The deadline of a lease this process holds.
   *
   * @param requestSentAtNanos {@code clock.nanoTime()} read <em>before</em> the acquiring or
   *     renewing request was sent, so that the whole round trip counts against the lease
   * @param leaseDuration the duration the server granted
   */
  public static Deadline forHolder(
      LeaseClock clock, long requestSentAtNanos, Duration leaseDuration) {
    return new Deadline(clock, requestSentAtNanos, leaseDuration);
  }

  /**
   * When a lease held by <em>someone else</em> has surely ended, unless it changes meanwhile.
   *
   * @param responseReturnedAtNanos {@code clock.nanoTime()} read <em>after</em> the read that
   *     showed the lease returned
   * @param storedLeaseDuration the duration stored with the lease by its holder, not this process's
   *     own setting
   */
  public static Deadline forContender(
      LeaseClock clock, long responseReturnedAtNanos, Duration storedLeaseDuration) {
    return new Deadline(clock, responseReturnedAtNanos, storedLeaseDuration);
  }

  /** Time left before the deadline; zero once it has passed. */
  public Duration remaining() {
    long left = durationNanos - elapsedNanos();
    return left > 0 ? Duration.ofNanos(left) : Duration.ZERO;
  }

  /** True once the deadline has passed. */
  public boolean hasExpired() {
    return elapsedNanos() >= durationNanos;
  }

  /** The lease duration this deadline was built from. */
  public Duration leaseDuration() {
    return leaseDuration;
  }

  /**
   * Refuses a protected write that could outlive the lease: passes only if {@code remaining -
   * safetyMargin > expectedWriteTime}.
   *
   * @param safetyMargin allowance for clock-rate drift and scheduling delay, zero or more
   * @param expectedWriteTime how long the write about to be sent is expected to take, zero or more
   * @throws LeaseLostException when the write must not be sent; the caller must stop writing and
   *     re-acquire
   */
  public void checkPointOfNoReturn(Duration safetyMargin, Duration expectedWriteTime) {
    requireNonNegative(safetyMargin, "safetyMargin");
    requireNonNegative(expectedWriteTime, "expectedWriteTime");
    Duration left = remaining();
    if (left.minus(safetyMargin).compareTo(expectedWriteTime) <= 0) {
      throw new LeaseLostException(
          "Point of no return passed: "
              + left.toMillis()
              + " ms of the lease remain, not more than the safety margin ("
              + safetyMargin.toMillis()
              + " ms) plus the expected write time ("
              + expectedWriteTime.toMillis()
              + " ms). Do not send the write; re-acquire the lease first.");
    }
  }

  private long elapsedNanos() {
    return clock.nanoTime() - startNanos;
  }

  private static Duration requireLeaseDuration(Duration duration) {
    Objects.requireNonNull(duration, "leaseDuration");
    if (duration.isNegative() || duration.isZero()) {
      throw new IllegalArgumentException(
          "A lease duration must be positive, got "
              + duration
              + ": pass the duration the lease was"
              + " granted for, e.g. Duration.ofSeconds(10).");
    }
    if (duration.compareTo(MAX_LEASE_DURATION) > 0) {
      throw new IllegalArgumentException(
          "A lease duration of "
              + duration
              + " is longer than "
              + MAX_LEASE_DURATION
              + ": a lease"
              + " that long is almost always a unit mistake (millis passed as seconds?).");
    }
    return duration;
  }

  private static void requireNonNegative(Duration duration, String name) {
    Objects.requireNonNull(duration, name);
    if (duration.isNegative()) {
      throw new IllegalArgumentException(name + " must be zero or more, got " + duration);
    }
  }

  @Override
  public String toString() {
    return "Deadline[remaining=" + remaining() + ", of=" + leaseDuration + "]";
  }
}
