package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/** The watchdog's readings on a manual clock; its thread is started by the last test only. */
class PauseWatchdogTest {

  private static final Duration SESSION = Duration.ofSeconds(10);

  private final ManualLeaseClock clock = new ManualLeaseClock();

  private PauseWatchdog watchdog(Duration threshold, Duration session) {
    return new PauseWatchdog(clock, threshold, session, "test");
  }

  @Test
  void readingsAtMostTickPlusThresholdApartCountAsRunning() {
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(2), SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    for (int i = 0; i < 10; i++) {
      clock.advance(Duration.ofMillis(2_100)); // TICK + threshold exactly: not a pause
      watchdog.tick();
    }
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(Duration.ofSeconds(21).toNanos());
  }

  /** 2.1 s + 1 ns: a pause, not counted; shorter than half the session: the count goes on. */
  @Test
  void aShortPauseIsNotCountedButKeepsTheCount() {
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(2), SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    clock.advance(Duration.ofSeconds(1));
    watchdog.tick();
    clock.advance(Duration.ofMillis(2_100).plusNanos(1));
    watchdog.tick();
    clock.advance(Duration.ofSeconds(1));
    watchdog.tick();
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(Duration.ofSeconds(2).toNanos());
  }

  /** Half the session: a pause that could have expired it; what ran before no longer counts. */
  @Test
  void aPauseOfHalfTheSessionRestartsTheCount() {
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(2), SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    clock.advance(Duration.ofSeconds(1));
    watchdog.tick();
    clock.advance(SESSION.dividedBy(2).minusNanos(1));
    watchdog.tick();
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(Duration.ofSeconds(1).toNanos());
    clock.advance(SESSION.dividedBy(2));
    watchdog.tick();
    clock.advance(PauseWatchdog.TICK);
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(PauseWatchdog.TICK.toNanos());
  }

  /**
   * A safety margin of 9 s in a 10 s session makes the pause threshold longer than half the
   * session: an 8 s pause, which can expire the session, must still restart the count.
   */
  @Test
  void aPauseOfHalfTheSessionRestartsTheCountWhateverTheThreshold() {
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(9), SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    clock.advance(Duration.ofSeconds(1));
    watchdog.tick();
    clock.advance(Duration.ofSeconds(8));
    watchdog.tick();
    assertThat(watchdog.runningSince(mark, clock.nanoTime())).isZero();
  }

  @Test
  void aPauseNotYetSeenByTheThreadIsSeenByTheCaller() {
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(2), SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    clock.advance(Duration.ofSeconds(1));
    watchdog.tick();
    clock.advance(SESSION);
    assertThat(watchdog.runningSince(mark, clock.nanoTime())).isZero();
  }

  /**
   * {@code safetyMargin(ZERO)}: the threshold is raised to one second, so a busy host's scheduling
   * delays (here half a second late) are not taken for pauses.
   */
  @Test
  void aZeroThresholdIsRaisedToTheFloor() {
    PauseWatchdog watchdog = watchdog(Duration.ZERO, SESSION);
    long mark = watchdog.mark(clock.nanoTime());
    clock.advance(Duration.ofMillis(600));
    watchdog.tick();
    Duration floor = PauseWatchdog.TICK.plus(PauseWatchdog.MIN_THRESHOLD);
    clock.advance(floor);
    watchdog.tick();
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(Duration.ofMillis(600).plus(floor).toNanos());
    clock.advance(floor.plusNanos(1));
    assertThat(watchdog.runningSince(mark, clock.nanoTime()))
        .isEqualTo(Duration.ofMillis(600).plus(floor).toNanos());
  }

  /**
   * A JVM with a 1.5 s GC pause every 30 s and a 45 s session: no such pause can expire the
   * session, so after a session timeout of running (pauses excluded) a stepped-aside partition is
   * due for its re-claim.
   */
  @Test
  void shortPausesWithinASessionDoNotRestartTheCount() {
    Duration session = Duration.ofSeconds(45);
    PauseWatchdog watchdog = watchdog(Duration.ofSeconds(1), session);
    long start = clock.nanoTime();
    long mark = watchdog.mark(start);
    for (int cycle = 0; cycle < 3; cycle++) {
      for (int i = 0; i < 285; i++) { // 28.5 s of running, a reading every TICK
        clock.advance(PauseWatchdog.TICK);
        watchdog.tick();
      }
      clock.advance(Duration.ofMillis(1_500)); // a GC pause: no reading
      watchdog.tick();
    }
    long now = clock.nanoTime();
    assertThat(watchdog.runningSince(mark, now))
        .as("running time counted after three 1.5 s pauses in %s s", (now - start) / 1_000_000_000)
        .isEqualTo(Duration.ofMillis(3 * 28_500).toNanos())
        .isGreaterThanOrEqualTo(session.toNanos());
  }

  /** A reading that throws is logged; the thread keeps reading instead of dying silently. */
  @Test
  void theThreadSurvivesAFailedReading() {
    AtomicInteger readings = new AtomicInteger();
    LeaseClock failingOnce =
        () -> {
          if (readings.incrementAndGet() == 2) {
            throw new IllegalStateException("a clock failure");
          }
          return clock.nanoTime();
        };
    try (PauseWatchdog watchdog = new PauseWatchdog(failingOnce, Duration.ZERO, SESSION, "test")) {
      watchdog.start();
      Awaitility.await("readings after the failed one").until(() -> readings.get() >= 4);
    }
  }
}
