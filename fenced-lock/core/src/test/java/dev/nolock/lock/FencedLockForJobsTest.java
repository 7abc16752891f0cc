package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.CapturedStderr;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * The facade as a scheduler uses it: a job without a watchdog that holds its lease for hours, a
 * short lease for a caller that never checks the point of no return, and a lease that simply lives
 * its TTL without being logged as a failure.
 */
class FencedLockForJobsTest {

  private final ManualLeaseClock clock = new ManualLeaseClock();
  private final InMemoryLockBackend backend = new InMemoryLockBackend(clock);

  private FencedLock withoutWatchdog() {
    return FencedLock.create(
        backend, LockConfig.custom(LockPurpose.EFFICIENCY).clock(clock).autoRenew(false).build());
  }

  @Test
  void aDailyJobWithoutAWatchdogMayHoldItsLeaseForHours() {
    try (FencedLock jobs = withoutWatchdog();
        FencedLock other = withoutWatchdog()) {
      HeldLock held = jobs.tryAcquire("nightly-report", Duration.ofHours(6)).get();
      clock.advance(Duration.ofHours(5));

      assertThat(held.isHeld()).isTrue();
      assertThat(other.tryAcquire("nightly-report", Duration.ofHours(6)).isEmpty())
          .as("still held five hours in")
          .isTrue();
    }
  }

  @Test
  void aTtlAboveAWeekIsStillRefusedWithAFix() {
    try (FencedLock jobs = withoutWatchdog()) {
      assertThatThrownBy(() -> jobs.tryAcquire("nightly-report", Duration.ofDays(8)))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("outside");
    }
  }

  /**
   * The default safety margin is 100 ms; a caller that never checks the point of no return (an
   * EFFICIENCY lock around an idempotent refresh) may still hold a 150 ms lease.
   */
  @Test
  void aShortLeaseIsGrantedToACallerThatNeverChecksThePointOfNoReturn() {
    try (FencedLock jobs = withoutWatchdog()) {
      HeldLock held = jobs.tryAcquire("cache-refresh", Duration.ofMillis(150)).get();

      assertThat(held.isHeld()).isTrue();
    }
  }

  /** Negative control: the margin still protects those who do check. */
  @Test
  void aMarginThatLeavesNoUsableLeaseIsRefusedAtThePointOfNoReturn() {
    try (FencedLock jobs = withoutWatchdog()) {
      HeldLock held = jobs.tryAcquire("cache-refresh", Duration.ofMillis(150)).get();

      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("safety margin");
    }
  }

  @Test
  void withoutAutoRenewalALeaseThatLivesItsTtlIsNotLoggedAsAWarning() {
    try (FencedLock jobs = withoutWatchdog();
        CapturedStderr err = new CapturedStderr()) {
      HeldLock held = jobs.tryAcquire("nightly-report", Duration.ofSeconds(3)).get();
      clock.advance(Duration.ofSeconds(4));

      held.release();

      assertThat(held.isLost()).as("it did end while held").isTrue();
      assertThat(err.lines())
          .filteredOn(line -> line.contains("Lost lease on nightly-report"))
          .hasSize(1)
          .allMatch(line -> line.contains("INFO"), "logged at INFO");
    }
  }

  /** Negative control: with a watchdog, a lease that runs out is a failure and a warning. */
  @Test
  void withAutoRenewalALeaseThatRunsOutIsAWarning() {
    try (FencedLock jobs =
            FencedLock.create(
                backend, LockConfig.custom(LockPurpose.EFFICIENCY).clock(clock).build());
        CapturedStderr err = new CapturedStderr()) {
      HeldLock held = jobs.tryAcquire("nightly-report", Duration.ofSeconds(3)).get();
      clock.advance(Duration.ofSeconds(4)); // a pause: no renewal had a chance

      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(LeaseLostException.class);
      assertThat(err.lines())
          .filteredOn(line -> line.contains("Lost lease on nightly-report"))
          .hasSize(1)
          .allMatch(line -> line.contains("WARN"), "logged as a warning");
    }
  }
}
