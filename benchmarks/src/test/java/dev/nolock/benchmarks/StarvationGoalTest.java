package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The starvation goal compares each fenced lock's longest wait before the stall with the blocking
 * advisory lock's: one unit stuck for a second fails it, however low the p99.
 */
class StarvationGoalTest {

  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

  /** 1000 units of 2 ms done before the stall, and one of {@code longestMs}. */
  private static ConvoyHarness.Result design(String name, long longestMs) {
    List<ConvoyHarness.Unit> units = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      units.add(new ConvoyHarness.Unit(100 * MS, 2 * MS, ConvoyHarness.Tries.done(1)));
    }
    units.add(new ConvoyHarness.Unit(100 * MS, longestMs * MS, ConvoyHarness.Tries.done(1)));
    return ConvoyHarness.classify(
        new ConvoyHarness.Design(name, false, "postgres", () -> null),
        units,
        0,
        2_000 * MS,
        3_000 * MS,
        4_000 * MS);
  }

  @Test
  void aFencedLockWithinFiveTimesTheAdvisoryLocksLongestWaitMeetsItAndOneStarvedUnitFailsIt() {
    List<Report.Goal> goals =
        Report.starvationGoals(
            List.of(
                design("Advisory lock, blocking (PostgreSQL, raw SQL)", 10),
                design("Fenced lock (PostgreSQL)", 40),
                design("Fenced lock (Redis)", 1_100)));

    assertThat(goals).hasSize(2);
    assertThat(goals.get(0).goal()).startsWith("Fenced lock (PostgreSQL): no waiter starved");
    assertThat(goals.get(0).status()).isEqualTo("met");
    assertThat(goals.get(1).status()).isEqualTo("not met");
    assertThat(goals.get(1).evidence()).startsWith("p99.9 / max").contains(" vs ");
  }

  /** 1000 CAS units of 2 ms before the stall, and one of {@code longestMs} that may give up. */
  private static ConvoyHarness.Result cas(long longestMs, boolean gaveUp) {
    return cas(longestMs, gaveUp, "CAS on a version column");
  }

  private static ConvoyHarness.Result cas(long longestMs, boolean gaveUp, String name) {
    List<ConvoyHarness.Unit> units = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      units.add(new ConvoyHarness.Unit(100 * MS, 2 * MS, ConvoyHarness.Tries.done(1)));
    }
    units.add(new ConvoyHarness.Unit(100 * MS, longestMs * MS, new ConvoyHarness.Tries(5, gaveUp)));
    return ConvoyHarness.classify(
        new ConvoyHarness.Design(name, true, "postgres", () -> null),
        units,
        0,
        2_000 * MS,
        3_000 * MS,
        4_000 * MS);
  }

  @Test
  void aCasWriterMeetsTheBoundedWorstCaseOnlyWithinTenTimesItsP99AndWithNoGiveUp() {
    assertThat(Report.casWorstCaseGoals(List.of(cas(19, false))).get(0).status()).isEqualTo("met");
    assertThat(Report.casWorstCaseGoals(List.of(cas(500, false))).get(0).status())
        .isEqualTo("not met");
    Report.Goal gaveUp = Report.casWorstCaseGoals(List.of(cas(19, true))).get(0);
    assertThat(gaveUp.status()).isEqualTo("not met");
    assertThat(gaveUp.evidence()).endsWith("1 of 1001 units gave up");
    assertThat(Report.casWorstCaseGoals(List.of(design("Fenced lock (PostgreSQL)", 500))))
        .isEmpty();
  }

  /** The lock-free mode is shown beside the default, not held to the bound the turns buy. */
  @Test
  void theLockFreeModeIsNotHeldToTheBoundedWorstCase() {
    assertThat(
            Report.casWorstCaseGoals(List.of(cas(500, false, ConvoyHarness.CAS_NEVER_TAKES_TURNS))))
        .isEmpty();
    assertThat(
            Report.casWorstCaseGoals(List.of(cas(500, false, ConvoyHarness.CAS_DEFAULT_RETRIES))))
        .hasSize(1);
  }

  @Test
  void withoutTheAdvisoryLockThereIsNothingToCompareWith() {
    assertThat(Report.starvationGoals(List.of(design("Fenced lock (PostgreSQL)", 40)))).isEmpty();
  }
}
