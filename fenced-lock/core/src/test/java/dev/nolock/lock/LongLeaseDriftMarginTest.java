package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The point of no return of a long lease keeps back the clock drift that lease can accumulate, not
 * only the fixed margin: over a week, holder and server clocks that disagree on the rate by 500 ppm
 * disagree by 5 minutes on where the lease ends, and a holder that kept back 100 ms would write for
 * minutes after the server gave the lease away. One manual clock serves the holder and the
 * in-memory "server", so that the tests read the holder's arithmetic alone.
 */
class LongLeaseDriftMarginTest {

  private static final Duration WEEK = Duration.ofDays(7);

  private final ManualLeaseClock clock = new ManualLeaseClock();
  private final InMemoryLockBackend backend = new InMemoryLockBackend(clock);
  private FencedLock lock;

  private HeldLock acquire(Duration ttl, UnaryOperator<LockConfig.Builder> settings) {
    lock =
        FencedLock.create(
            backend,
            settings
                .apply(LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false))
                .build());
    return lock.tryAcquire("weekly", ttl).get();
  }

  @AfterEach
  void close() {
    if (lock != null) {
      lock.close();
    }
  }

  /** 7 days x 500 ppm = 302.4 s: a minute before the holder's deadline is inside it. */
  @Test
  void aWeekLongLeaseRefusesAWriteWithinItsDriftOfTheEnd() {
    HeldLock held = acquire(WEEK, UnaryOperator.identity());
    clock.advance(WEEK.minusMinutes(1));

    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("302400 ms");
  }

  @Test
  void aWeekLongLeaseStillPassesJustOutsideItsDriftMargin() {
    HeldLock held = acquire(WEEK, UnaryOperator.identity());
    clock.advance(WEEK.minusSeconds(303));

    held.checkPointOfNoReturn(Duration.ZERO);
  }

  /**
   * Negative control: with the drift bound set to zero only the fixed 100 ms is kept back, and the
   * write a minute before the end passes, as it did before the margin scaled.
   */
  @Test
  void negativeControlWithoutADriftBoundAWeekLongLeaseKeepsBackOnlyTheFixedMargin() {
    HeldLock held = acquire(WEEK, b -> b.clockDriftPpm(0));
    clock.advance(WEEK.minusMinutes(1));

    held.checkPointOfNoReturn(Duration.ZERO);
  }

  /** A short lease keeps the fixed margin: 10 s x 500 ppm = 5 ms is less than 100 ms. */
  @Test
  void aShortLeaseKeepsTheFixedMargin() {
    HeldLock held = acquire(Duration.ofSeconds(10), UnaryOperator.identity());
    clock.advance(Duration.ofMillis(9_850));

    held.checkPointOfNoReturn(Duration.ZERO);
    clock.advance(Duration.ofMillis(50)); // 100 ms left: not more than the margin
    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("100 ms");
  }

  /**
   * The drift is that of the lease as the holder now counts it: after an extension to an hour, an
   * hour's drift (1.8 s), not the week's.
   */
  @Test
  void theMarginFollowsTheLengthTheDeadlineCountsAfterAnExtension() {
    HeldLock held = acquire(WEEK, UnaryOperator.identity());
    held.extend(Duration.ofHours(1));
    clock.advance(Duration.ofHours(1).minusSeconds(2));

    held.checkPointOfNoReturn(Duration.ZERO);
    clock.advance(Duration.ofMillis(300)); // 1.7 s left: within the hour's 1.8 s
    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class);
  }

  @Test
  void theMarginForALengthIsTheLargerOfTheFixedMarginAndTheDrift() {
    LockConfig config = LockConfig.ofDefaults(LockPurpose.CORRECTNESS);

    assertThat(config.clockDriftPpm()).isEqualTo(LockConfig.DEFAULT_CLOCK_DRIFT_PPM).isEqualTo(500);
    assertThat(config.safetyMarginFor(Duration.ofSeconds(10))).isEqualTo(Duration.ofMillis(100));
    assertThat(config.safetyMarginFor(Duration.ofSeconds(200))).isEqualTo(Duration.ofMillis(100));
    assertThat(config.safetyMarginFor(Duration.ofSeconds(300))).isEqualTo(Duration.ofMillis(150));
    assertThat(config.safetyMarginFor(WEEK)).isEqualTo(Duration.ofMillis(302_400));
  }

  @Test
  void aDriftBoundOutsideItsRangeIsRefusedWithAFix() {
    assertThatThrownBy(() -> LockConfig.custom(LockPurpose.CORRECTNESS).clockDriftPpm(-1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 0 and 100000");
    assertThatThrownBy(() -> LockConfig.custom(LockPurpose.CORRECTNESS).clockDriftPpm(100_001))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 0 and 100000");
  }
}
