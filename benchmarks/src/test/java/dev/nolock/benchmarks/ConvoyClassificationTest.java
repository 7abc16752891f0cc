package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How units are filed against the stall decides whether a convoy shows up at all. */
class ConvoyClassificationTest {

  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);
  private static final ConvoyHarness.Design DESIGN =
      new ConvoyHarness.Design("test", false, "postgres", () -> null);

  @Test
  void aUnitThatStartedBeforeTheStallAndWaitedThroughItCountsAsDuring() {
    // t0 = 0, stall 1000..3000 ms, end 4000 ms
    List<ConvoyHarness.Unit> units =
        List.of(
            new ConvoyHarness.Unit(100 * MS, 5 * MS, ConvoyHarness.Tries.done(1)), // before, 5 ms
            new ConvoyHarness.Unit(
                990 * MS,
                2_020 * MS,
                ConvoyHarness.Tries.done(1)), // queued behind the stalled holder
            new ConvoyHarness.Unit(3_500 * MS, 7 * MS, ConvoyHarness.Tries.done(1))); // after

    ConvoyHarness.Result result =
        ConvoyHarness.classify(DESIGN, units, 0, 1_000 * MS, 3_000 * MS, 4_000 * MS);

    assertThat(result.before().getTotalCount()).isEqualTo(1);
    assertThat(result.during().getTotalCount()).isEqualTo(1);
    assertThat(result.during().getMaxValue()).isGreaterThanOrEqualTo(2_000 * MS);
    assertThat(result.after().getTotalCount()).isEqualTo(1);
    assertThat(result.stallFromSecond()).isEqualTo(1.0);
    assertThat(result.stallToSecond()).isEqualTo(3.0);
  }

  @Test
  void throughputCountsUnitsByWhenTheyCompleted() {
    List<ConvoyHarness.Unit> units =
        List.of(
            new ConvoyHarness.Unit(100 * MS, 5 * MS, ConvoyHarness.Tries.done(1)),
            new ConvoyHarness.Unit(200 * MS, 5 * MS, ConvoyHarness.Tries.done(1)),
            new ConvoyHarness.Unit(
                990 * MS, 2_020 * MS, ConvoyHarness.Tries.done(1)), // completes after the stall
            new ConvoyHarness.Unit(3_500 * MS, 7 * MS, ConvoyHarness.Tries.done(1)));

    ConvoyHarness.Result result =
        ConvoyHarness.classify(DESIGN, units, 0, 1_000 * MS, 3_000 * MS, 4_000 * MS);

    assertThat(result.beforePerSecond()).isEqualTo(2.0); // 2 units in 1 s
    assertThat(result.duringPerSecond()).isZero(); // nothing finished while the holder stalled
    assertThat(result.afterPerSecond()).isEqualTo(2.0); // 2 units in 1 s
  }

  @Test
  void attemptsAndGiveUpsAreCountedInTheUnitsPhase() {
    List<ConvoyHarness.Unit> units =
        List.of(
            new ConvoyHarness.Unit(100 * MS, 5 * MS, ConvoyHarness.Tries.done(1)),
            new ConvoyHarness.Unit(200 * MS, 5 * MS, ConvoyHarness.Tries.done(3)),
            new ConvoyHarness.Unit(990 * MS, 40 * MS, new ConvoyHarness.Tries(10, true)),
            new ConvoyHarness.Unit(3_500 * MS, 7 * MS, ConvoyHarness.Tries.done(2)));

    ConvoyHarness.Result result =
        ConvoyHarness.classify(DESIGN, units, 0, 1_000 * MS, 3_000 * MS, 4_000 * MS);

    assertThat(result.attemptsPerUnit(ConvoyHarness.Phase.BEFORE)).isEqualTo(2.0);
    assertThat(result.attemptsPerUnit(ConvoyHarness.Phase.DURING)).isEqualTo(10.0);
    assertThat(result.attemptsPerUnit(ConvoyHarness.Phase.AFTER)).isEqualTo(2.0);
    assertThat(result.giveUps()).isEqualTo(new ConvoyHarness.Phases(0, 1, 0));
  }

  @Test
  void theChartShowsAUnitWaitingThroughTheStallAsARamp() {
    List<ConvoyHarness.Unit> units =
        List.of(
            new ConvoyHarness.Unit(100 * MS, 5 * MS, ConvoyHarness.Tries.done(1)),
            new ConvoyHarness.Unit(990 * MS, 2_020 * MS, ConvoyHarness.Tries.done(1)));

    ConvoyHarness.Result result =
        ConvoyHarness.classify(DESIGN, units, 0, 1_000 * MS, 3_000 * MS, 4_000 * MS);

    // slice 20 is 2000..2100 ms: the queued unit is 1110 ms old at its end
    assertThat(result.slices().get(20)[1]).isEqualTo(1_110 * MS);
    assertThat(result.slices().get(29)[1]).isEqualTo(2_010 * MS);
    assertThat(result.slices().get(1)[1]).isEqualTo(5 * MS);
    assertThat(result.slices().get(5)[2]).isZero(); // nothing in flight at 500 ms
  }
}
