package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The watchdog's readings on a manual clock; its thread is never started here. */
class PauseWatchdogTest {

  private final ManualLeaseClock clock = new ManualLeaseClock();

  @Test
  void readingsAtMostTickPlusThresholdApartKeepTheRunningTime() {
    PauseWatchdog watchdog = new PauseWatchdog(clock, Duration.ofSeconds(2), "test");
    long start = clock.nanoTime();
    for (int i = 0; i < 10; i++) {
      clock.advance(Duration.ofMillis(2_100)); // TICK + threshold exactly: not a pause
      watchdog.tick();
    }
    assertThat(watchdog.runningSinceNanos(clock.nanoTime())).isEqualTo(start);
  }

  @Test
  void aGapLongerThanTickPlusThresholdRestartsTheRunningTimeThere() {
    PauseWatchdog watchdog = new PauseWatchdog(clock, Duration.ofSeconds(2), "test");
    clock.advance(Duration.ofMillis(2_100).plusNanos(1));
    watchdog.tick();
    long resumed = clock.nanoTime();
    clock.advance(Duration.ofMillis(100));
    watchdog.tick();
    assertThat(watchdog.runningSinceNanos(clock.nanoTime())).isEqualTo(resumed);
  }

  @Test
  void aPauseNotYetSeenByTheThreadIsSeenByTheCaller() {
    PauseWatchdog watchdog = new PauseWatchdog(clock, Duration.ofSeconds(2), "test");
    clock.advance(Duration.ofSeconds(10));
    long now = clock.nanoTime();
    assertThat(watchdog.runningSinceNanos(now)).isEqualTo(now);
  }

  /**
   * {@code safetyMargin(ZERO)}: the threshold is raised to one second, so a busy host's scheduling
   * delays (here half a second late) are not taken for pauses.
   */
  @Test
  void aZeroThresholdIsRaisedToTheFloor() {
    PauseWatchdog watchdog = new PauseWatchdog(clock, Duration.ZERO, "test");
    long start = clock.nanoTime();
    clock.advance(Duration.ofMillis(600));
    watchdog.tick();
    clock.advance(PauseWatchdog.TICK.plus(PauseWatchdog.MIN_THRESHOLD));
    watchdog.tick();
    assertThat(watchdog.runningSinceNanos(clock.nanoTime())).isEqualTo(start);
    clock.advance(PauseWatchdog.TICK.plus(PauseWatchdog.MIN_THRESHOLD).plusNanos(1));
    assertThat(watchdog.runningSinceNanos(clock.nanoTime())).isEqualTo(clock.nanoTime());
  }
}
