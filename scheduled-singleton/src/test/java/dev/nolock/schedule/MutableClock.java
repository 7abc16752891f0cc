package dev.nolock.schedule;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;

/** A wall clock the test sets and advances; thread-safe. */
final class MutableClock extends Clock {

  /**
   * The claim window of tests on a simulated calendar: their scheduled times lie months from the
   * database's clock, which the claim window would refuse (what it is for is {@code ClockSkewIT}'s
   * subject).
   */
  static final Duration ANY_DATE = ScheduleConfig.MAX_CLAIM_WINDOW;

  private volatile Instant now;

  MutableClock(Instant start) {
    this.now = start;
  }

  void set(Instant instant) {
    this.now = instant;
  }

  void advance(Duration duration) {
    this.now = now.plus(duration);
  }

  @Override
  public Instant instant() {
    return now;
  }

  @Override
  public ZoneId getZone() {
    return ZoneOffset.UTC;
  }

  @Override
  public Clock withZone(ZoneId zone) {
    throw new UnsupportedOperationException("the tests use UTC");
  }
}
