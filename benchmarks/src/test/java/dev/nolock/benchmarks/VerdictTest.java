package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.benchmarks.PairedStats.Estimate;
import dev.nolock.benchmarks.PairedStats.Ratio;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How a goal is graded from its ratios' intervals (one ratio per cell). */
class VerdictTest {

  private static Ratio ratio(double median, double low, double high) {
    return new Ratio(new Estimate(median, low, high, 8), median, median);
  }

  @Test
  void metOnlyWhenEveryLowerBoundReachesTheGoal() {
    assertThat(Report.status(List.of(ratio(0.95, 0.91, 0.99), ratio(1.0, 0.9, 1.1)), 0.9))
        .isEqualTo("met");
  }

  @Test
  void aMedianAtTheGoalWithAnIntervalBelowItIsNotMet() {
    // The old rule graded the point estimate: 0.91 ≥ 0.9 was "met" although 0.85 was as likely.
    assertThat(Report.status(List.of(ratio(0.91, 0.85, 0.97)), 0.9)).startsWith("undecided");
  }

  @Test
  void notMetOnlyWhenAnUpperBoundFallsShort() {
    assertThat(Report.status(List.of(ratio(1.0, 0.95, 1.05), ratio(0.8, 0.75, 0.89)), 0.9))
        .isEqualTo("not met");
    assertThat(Report.status(List.of(ratio(0.85, 0.8, 0.92)), 0.9)).startsWith("undecided");
  }

  @Test
  void oneRunWithoutAnIntervalDecidesNothing() {
    Ratio oneRun = new Ratio(new Estimate(2.1, 2.1, 2.1, 1), Double.NaN, Double.NaN);

    assertThat(Report.status(List.of(oneRun), 2.0)).startsWith("undecided (one run");
  }

  @Test
  void aDesignThatBeatsItsOwnFloorBeyondTheIntervalIsAnArtefactNotMet() {
    List<Ratio> ratios = List.of(ratio(1.6, 1.4, 1.8), ratio(1.0, 0.95, 1.05));

    assertThat(Report.floorStatus(ratios, 0.9)).startsWith("artefact");
    assertThat(Report.status(ratios, 0.9))
        .as("the same ratios graded as a peer comparison")
        .isEqualTo("met");
  }

  @Test
  void anArtefactInOneCellNeverHidesAShortfallInAnother() {
    List<Ratio> ratios = List.of(ratio(1.2, 1.07, 1.33), ratio(0.6, 0.55, 0.65));

    assertThat(Report.floorStatus(ratios, 0.9)).startsWith("not met; also artefact");
  }

  private static Report.Figure units(double median, double low, double high) {
    return new Report.Figure(
        Catalog.ENTRIES.get(0), 4, 1, median, low, high, 6, median, java.util.Map.of());
  }

  @Test
  void aWinnerClearsEveryOtherCandidatesIntervalNotOnlyTheRunnerUps() {
    Report.Figure best = units(5_000, 4_800, 5_200);
    Report.Figure second = units(4_500, 4_400, 4_700);
    Report.Figure wideThird = units(4_400, 3_000, 5_000);

    assertThat(Report.clearWinner(List.of(best, second))).isTrue();
    assertThat(Report.clearWinner(List.of(best, second, wideThird)))
        .as("the third's interval reaches the best's")
        .isFalse();
  }

  @Test
  void candidatesFromTwoPairedRunsNeverMakeAWinner() {
    Report.Figure fromOneRun = units(5_000, 4_800, 5_200);
    Report.Figure fromAnother =
        new Report.Figure(
            Catalog.ENTRIES.stream()
                .filter(e -> e.source() != Catalog.ENTRIES.get(0).source())
                .findFirst()
                .orElseThrow(),
            4,
            1,
            1_000,
            900,
            1_100,
            6,
            1_000,
            java.util.Map.of());

    assertThat(Report.clearWinner(List.of(fromOneRun, fromAnother))).isFalse();
  }
}
