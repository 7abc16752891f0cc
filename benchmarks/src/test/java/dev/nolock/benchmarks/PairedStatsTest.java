package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.entry;
import static org.assertj.core.api.Assertions.within;

import dev.nolock.benchmarks.Paired.Turn;
import dev.nolock.benchmarks.PairedStats.Estimate;
import dev.nolock.benchmarks.PairedStats.Ratio;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;

/**
 * The paired statistics on synthetic turns whose true ratio is known: a design that does 0.9 of its
 * floor's work on a machine whose speed drifts, jitters, or favours whoever runs second.
 */
class PairedStatsTest {

  private static final double TRUE_RATIO = 0.9;

  /** The machine's speed at turn {@code t} of the run: it loses 2 % per turn, steadily. */
  private static double drifting(int t) {
    return 10_000 * Math.pow(0.98, t);
  }

  @Test
  void aSteadyDriftCancelsOutOfThePalindromicOrder() {
    List<Turn> turns = run(6, (block, n) -> Paired.order(List.of("design", "floor"), block));

    Ratio ratio = PairedStats.ratio(turns, "design", "floor", 4, 1).orElseThrow();

    // Exactly cancelled only for a linear drift; a 2 % geometric one leaves well under 0.1 %.
    assertThat(ratio.estimate().median()).isCloseTo(TRUE_RATIO, within(0.001));
    assertThat(ratio.estimate().low()).isCloseTo(TRUE_RATIO, within(0.001));
    assertThat(ratio.estimate().high()).isCloseTo(TRUE_RATIO, within(0.001));
  }

  @Test
  void negativeControlTheSameDriftInAlternatingOrderBiasesTheRatio() {
    // A B A B: the design always runs before the floor, on a faster machine.
    List<Turn> turns = run(6, (block, n) -> List.of("design", "floor", "design", "floor"));

    Ratio ratio = PairedStats.ratio(turns, "design", "floor", 4, 1).orElseThrow();

    assertThat(ratio.estimate().median()).isGreaterThan(TRUE_RATIO + 0.01);
    assertThat(ratio.estimate().low()).isGreaterThan(TRUE_RATIO);
  }

  @Test
  void withThreeVariantsEachRunsTwiceInARowEquallyOften() {
    // Unrotated palindromes (A B C C B A, C B A A B C) would double only the two end variants.
    List<String> variants = List.of("a", "b", "c");
    java.util.Map<String, Integer> doubled = new java.util.HashMap<>();
    for (int block = 0; block < 6; block++) {
      List<String> order = Paired.order(variants, block);
      assertThat(order).hasSize(6).containsOnly("a", "b", "c");
      List<String> firstHalfBackwards = new ArrayList<>(order.subList(0, 3));
      java.util.Collections.reverse(firstHalfBackwards);
      assertThat(order.subList(3, 6)).containsExactlyElementsOf(firstHalfBackwards);
      doubled.merge(order.get(2), 1, Integer::sum);
    }

    assertThat(doubled).containsOnly(entry("a", 2), entry("b", 2), entry("c", 2));
  }

  @Test
  void aCarryOverShowsAsAnOrderEffect() {
    // Whoever runs second in a pair is 10 % slower (say, the first left the server busy).
    List<Turn> turns = new ArrayList<>();
    for (int block = 0; block < 8; block++) {
      List<String> order = Paired.order(List.of("design", "floor"), block);
      for (int position = 0; position < order.size(); position++) {
        boolean second = position == 1 || position == 3;
        double rate = (order.get(position).equals("design") ? TRUE_RATIO : 1.0) * 10_000;
        turns.add(turn(order.get(position), block, position, second ? rate * 0.9 : rate));
      }
    }

    Ratio ratio = PairedStats.ratio(turns, "design", "floor", 4, 1).orElseThrow();

    assertThat(ratio.estimate().median()).isCloseTo(TRUE_RATIO, within(0.001));
    assertThat(ratio.designFirst()).isCloseTo(TRUE_RATIO / 0.9, within(0.001));
    assertThat(ratio.referenceFirst()).isCloseTo(TRUE_RATIO * 0.9, within(0.001));
  }

  @Test
  void theIntervalCoversTheTruthAndNarrowsWithMoreBlocks() {
    Random noise = new Random(7);
    BiFunction<Integer, Integer, List<String>> palindrome =
        (block, n) -> Paired.order(List.of("d", "f"), block);
    Estimate few = ratioWithNoise(4, noise, palindrome);
    Estimate many = ratioWithNoise(40, noise, palindrome);

    assertThat(few.low()).isLessThanOrEqualTo(TRUE_RATIO);
    assertThat(few.high()).isGreaterThanOrEqualTo(TRUE_RATIO);
    assertThat(many.low()).isLessThanOrEqualTo(TRUE_RATIO);
    assertThat(many.high()).isGreaterThanOrEqualTo(TRUE_RATIO);
    assertThat(many.halfWidth()).isLessThan(few.halfWidth());
    assertThat(many.blocks()).isEqualTo(40);
  }

  @Test
  void theSameTurnsGiveTheSameInterval() {
    double[] values = {0.8, 0.95, 0.9, 0.85, 1.0, 0.92};

    assertThat(PairedStats.estimate(values)).isEqualTo(PairedStats.estimate(values));
  }

  @Test
  void aBlockMissingATurnIsLeftOutNotHalved() {
    List<Turn> turns =
        new ArrayList<>(run(3, (block, n) -> Paired.order(List.of("d", "f"), block)));
    turns.removeIf(t -> t.id().equals("f") && t.block() == 1 && t.position() > 1);

    Ratio ratio = PairedStats.ratio(turns, "d", "f", 4, 1).orElseThrow();

    assertThat(ratio.estimate().blocks()).isEqualTo(2);
  }

  private static Estimate ratioWithNoise(
      int blocks, Random noise, BiFunction<Integer, Integer, List<String>> order) {
    List<Turn> turns = new ArrayList<>();
    for (int block = 0; block < blocks; block++) {
      List<String> ids = order.apply(block, 2);
      for (int position = 0; position < ids.size(); position++) {
        double rate = (ids.get(position).equals("d") ? TRUE_RATIO : 1.0) * 10_000;
        turns.add(
            turn(ids.get(position), block, position, rate * (1 + 0.1 * noise.nextGaussian())));
      }
    }
    return PairedStats.ratio(turns, "d", "f", 4, 1).orElseThrow().estimate();
  }

  /** Turns of "design" (0.9) and "floor" (1.0) in the given order per block, on the drift. */
  private static List<Turn> run(int blocks, BiFunction<Integer, Integer, List<String>> order) {
    List<Turn> turns = new ArrayList<>();
    int t = 0;
    for (int block = 0; block < blocks; block++) {
      List<String> ids = order.apply(block, 2);
      for (int position = 0; position < ids.size(); position++) {
        String id = ids.get(position);
        double work = id.equals("floor") || id.equals("f") ? 1.0 : TRUE_RATIO;
        turns.add(turn(id, block, position, work * drifting(t++)));
      }
    }
    return turns;
  }

  private static Turn turn(String id, int block, int position, double ok) {
    return new Turn(id, 4, 1, block, position, ok, ok);
  }
}
