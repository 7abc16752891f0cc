package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The convoy's recommendation weighs the tail, not only p99: a phase holds few units, so a design
 * with one unit stuck for seconds must not win on a low p99.
 */
class ConvoyRankingTest {

  private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

  /**
   * 1000 units of {@code typicalMs} during the stall, plus {@code slow} units of {@code slowMs}.
   */
  private static ConvoyHarness.Result design(String name, long typicalMs, int slow, long slowMs) {
    List<ConvoyHarness.Unit> units = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      units.add(new ConvoyHarness.Unit(1_100 * MS, typicalMs * MS, ConvoyHarness.Tries.done(1)));
    }
    for (int i = 0; i < slow; i++) {
      units.add(new ConvoyHarness.Unit(1_100 * MS, slowMs * MS, ConvoyHarness.Tries.done(1)));
    }
    return ConvoyHarness.classify(
        new ConvoyHarness.Design(name, false, "postgres", () -> null),
        units,
        0,
        1_000 * MS,
        3_000 * MS,
        4_000 * MS);
  }

  @Test
  void aLowerP99WithASlowerTailIsATieNotAWin() {
    ConvoyHarness.Result lowP99LongTail = design("polling", 2, 2, 2_000);
    ConvoyHarness.Result higherP99ShortTail = design("blocking", 5, 0, 0);

    String[] winner =
        Report.convoyWinner(List.of(higherP99ShortTail, lowP99LongTail)).orElseThrow();

    assertThat(winner[0]).startsWith("tie: polling (lower p99); blocking (lower tail)");
    assertThat(winner[1]).contains("1002 units").contains("1000 units");
  }

  @Test
  void aLowerP99WithATailNoWorseWins() {
    ConvoyHarness.Result lowEverywhere = design("cas", 2, 0, 0);
    ConvoyHarness.Result higher = design("blocking", 5, 2, 2_000);

    String[] winner = Report.convoyWinner(List.of(higher, lowEverywhere)).orElseThrow();

    assertThat(winner[0]).isEqualTo("cas");
  }

  @Test
  void aThirdDesignWithTheLowestTailMakesItATieToo() {
    // The runner-up by p99 has the worst tail; the third has the best: the leader must not win.
    ConvoyHarness.Result leader = design("a", 1, 2, 100);
    ConvoyHarness.Result runnerUp = design("b", 2, 2, 200);
    ConvoyHarness.Result third = design("c", 3, 0, 0);

    String[] winner = Report.convoyWinner(List.of(runnerUp, third, leader)).orElseThrow();

    assertThat(winner[0]).isEqualTo("tie: a (lower p99); c (lower tail)");
  }

  @Test
  void aDesignThatGaveUpOnAUnitDuringTheStallCannotWin() {
    // Its give-up ended a unit early: the lowest latencies, bought by failing a write.
    List<ConvoyHarness.Unit> units = new ArrayList<>();
    for (int i = 0; i < 1_000; i++) {
      units.add(new ConvoyHarness.Unit(1_100 * MS, MS, ConvoyHarness.Tries.done(1)));
    }
    units.add(new ConvoyHarness.Unit(1_100 * MS, MS, new ConvoyHarness.Tries(10, true)));
    ConvoyHarness.Result gaveUp =
        ConvoyHarness.classify(
            new ConvoyHarness.Design("gave up", true, "postgres", () -> null),
            units,
            0,
            1_000 * MS,
            3_000 * MS,
            4_000 * MS);
    ConvoyHarness.Result slower = design("slower", 5, 0, 0);

    assertThat(Report.convoyWinner(List.of(gaveUp, slower)).orElseThrow()[0]).isEqualTo("slower");
  }

  @Test
  void anEqualP99IsATieWhicheverComesFirst() {
    ConvoyHarness.Result x = design("x", 2, 0, 0);
    ConvoyHarness.Result y = design("y", 2, 0, 0);

    assertThat(Report.convoyWinner(List.of(x, y)).orElseThrow()[0]).startsWith("tie: ");
    assertThat(Report.convoyWinner(List.of(y, x)).orElseThrow()[0]).startsWith("tie: ");
  }
}
