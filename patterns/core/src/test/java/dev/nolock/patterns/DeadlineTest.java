package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class DeadlineTest {

  private static final long MAX_LEASE_NANOS =
      7L * 24 * 3600 * 1_000_000_000L; // Deadline.MAX_LEASE_DURATION

  @Test
  void theHolderCountsFromBeforeItsRequestSoTheRoundTripIsSubtracted() {
    ManualLeaseClock clock = new ManualLeaseClock();
    long sent = clock.nanoTime();
    clock.advance(Duration.ofMillis(300)); // the acquiring round trip
    Deadline deadline = Deadline.forHolder(clock, sent, Duration.ofSeconds(10));

    assertThat(deadline.remaining()).isEqualTo(Duration.ofMillis(9_700));
  }

  @Test
  void theContenderCountsFromWhenItsReadReturned() {
    ManualLeaseClock clock = new ManualLeaseClock();
    clock.advance(Duration.ofMillis(300)); // the read's round trip
    long returned = clock.nanoTime();
    Deadline othersLease = Deadline.forContender(clock, returned, Duration.ofSeconds(10));

    assertThat(othersLease.remaining()).isEqualTo(Duration.ofSeconds(10));
  }

  @Test
  void pointOfNoReturnRefusesAWriteThatCouldOutliveTheLease() {
    ManualLeaseClock clock = new ManualLeaseClock();
    Deadline deadline = Deadline.forHolder(clock, clock.nanoTime(), Duration.ofSeconds(3));
    clock.advance(Duration.ofMillis(2_700)); // 300 ms left

    assertThatCode(
            () -> deadline.checkPointOfNoReturn(Duration.ofMillis(100), Duration.ofMillis(199)))
        .doesNotThrowAnyException();
    assertThatThrownBy(
            () -> deadline.checkPointOfNoReturn(Duration.ofMillis(100), Duration.ofMillis(200)))
        .isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("300 ms of the lease remain")
        .hasMessageContaining("re-acquire");
  }

  @Test
  void anExpiredLeaseHasNothingRemainingAndRefusesEveryWrite() {
    ManualLeaseClock clock = new ManualLeaseClock();
    Deadline deadline = Deadline.forHolder(clock, clock.nanoTime(), Duration.ofSeconds(3));
    clock.advance(Duration.ofSeconds(5));

    assertThat(deadline.hasExpired()).isTrue();
    assertThat(deadline.remaining()).isEqualTo(Duration.ZERO);
    assertThatThrownBy(() -> deadline.checkPointOfNoReturn(Duration.ZERO, Duration.ZERO))
        .isInstanceOf(LeaseLostException.class);
  }

  @Test
  void badDurationsAreRefusedWithAFix() {
    LeaseClock clock = new ManualLeaseClock();
    assertThatThrownBy(() -> Deadline.forHolder(clock, 0, Duration.ZERO))
        .hasMessageContaining("must be positive");
    assertThatThrownBy(() -> Deadline.forHolder(clock, 0, Duration.ofDays(30)))
        .hasMessageContaining("unit mistake");
    Deadline deadline = Deadline.forHolder(clock, 0, Duration.ofSeconds(1));
    assertThatThrownBy(() -> deadline.checkPointOfNoReturn(Duration.ofMillis(-1), Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("safetyMargin");
  }

  @Property
  void remainingIsTheDurationMinusTheElapsedTimeAcrossCounterOverflow(
      @ForAll long start,
      @ForAll @LongRange(min = 1, max = MAX_LEASE_NANOS) long duration,
      @ForAll @LongRange(min = 0, max = 2 * MAX_LEASE_NANOS) long elapsed) {
    ManualLeaseClock clock = new ManualLeaseClock(start);
    Deadline deadline = Deadline.forHolder(clock, start, Duration.ofNanos(duration));
    clock.advance(Duration.ofNanos(elapsed));

    assertThat(deadline.remaining()).isEqualTo(Duration.ofNanos(Math.max(0, duration - elapsed)));
    assertThat(deadline.hasExpired()).isEqualTo(elapsed >= duration);
  }

  @Property
  void pointOfNoReturnPassesExactlyWhenRemainingMinusMarginExceedsTheWriteTime(
      @ForAll @LongRange(min = 1, max = 60_000) long leaseMillis,
      @ForAll @LongRange(min = 0, max = 60_000) long elapsedMillis,
      @ForAll @LongRange(min = 0, max = 5_000) long marginMillis,
      @ForAll @LongRange(min = 0, max = 5_000) long writeMillis) {
    ManualLeaseClock clock = new ManualLeaseClock();
    Deadline deadline = Deadline.forHolder(clock, 0, Duration.ofMillis(leaseMillis));
    clock.advance(Duration.ofMillis(elapsedMillis));
    long remaining = Math.max(0, leaseMillis - elapsedMillis);
    boolean shouldPass = remaining - marginMillis > writeMillis;

    boolean passed;
    try {
      deadline.checkPointOfNoReturn(
          Duration.ofMillis(marginMillis), Duration.ofMillis(writeMillis));
      passed = true;
    } catch (LeaseLostException e) {
      passed = false;
    }
    assertThat(passed).isEqualTo(shouldPass);
  }

  /**
   * The server starts the lease somewhere inside the acquiring round trip; the holder, counting
   * from before the send, never believes its lease ends after the server's expiry.
   */
  @Property
  void aHolderNeverOutlivesTheServersLease(
      @ForAll long sentAt,
      @ForAll @LongRange(min = 0, max = 10_000_000_000L) long grantedAfter,
      @ForAll @LongRange(min = 0, max = 10_000_000_000L) long respondedAfterGrant,
      @ForAll @LongRange(min = 1, max = 60_000_000_000L) long ttl,
      @ForAll @LongRange(min = 0, max = 120_000_000_000L) long checkedAfterSend) {
    ManualLeaseClock clock = new ManualLeaseClock(sentAt);
    clock.advance(Duration.ofNanos(grantedAfter + respondedAfterGrant));
    Deadline holder = Deadline.forHolder(clock, sentAt, Duration.ofNanos(ttl));
    long sinceResponse = checkedAfterSend - grantedAfter - respondedAfterGrant;
    if (sinceResponse > 0) {
      clock.advance(Duration.ofNanos(sinceResponse));
    }
    long elapsedSinceSend = clock.nanoTime() - sentAt;
    boolean serverStillHolds = elapsedSinceSend - grantedAfter < ttl;

    if (!holder.hasExpired()) {
      assertThat(serverStillHolds).as("holder believes it holds, so the server must too").isTrue();
    }
  }

  /**
   * The contender's read was served after the holder's last renewal was sent, so waiting the stored
   * duration from when the read returned never ends before the holder's own deadline.
   */
  @Property
  void aContenderNeverTakesOverBeforeTheHoldersDeadline(
      @ForAll @LongRange(min = 0, max = 10_000_000_000L) long renewalSentAt,
      @ForAll @LongRange(min = 0, max = 10_000_000_000L) long readServedAfterRenewal,
      @ForAll @LongRange(min = 0, max = 10_000_000_000L) long readReturnedAfterServe,
      @ForAll @LongRange(min = 1, max = 60_000_000_000L) long ttl,
      @ForAll @LongRange(min = 0, max = 120_000_000_000L) long later) {
    ManualLeaseClock clock = new ManualLeaseClock(renewalSentAt);
    Deadline holder = Deadline.forHolder(clock, renewalSentAt, Duration.ofNanos(ttl));
    clock.advance(Duration.ofNanos(readServedAfterRenewal + readReturnedAfterServe));
    Deadline contender = Deadline.forContender(clock, clock.nanoTime(), Duration.ofNanos(ttl));
    clock.advance(Duration.ofNanos(later));

    if (contender.hasExpired()) {
      assertThat(holder.hasExpired())
          .as("contender takes over only after the holder gave up")
          .isTrue();
    }
  }
}
