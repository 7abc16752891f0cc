package dev.nolock.benchmarks;

import dev.nolock.benchmarks.Paired.Turn;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.function.ToDoubleFunction;

/**
 * The figures of a paired run ({@link Paired}), with a 95 % interval from a bootstrap over whole
 * blocks. Hand-written because it is twenty lines: a percentile bootstrap of a median needs no
 * statistics library.
 *
 * <ol>
 *   <li>Per block, a variant's rate is the mean of its two turns; a ratio is the design's block
 *       rate over the reference's, so each block gives one ratio, free of any drift that is linear
 *       over the block.
 *   <li>The figure is the median of the per-block values.
 *   <li>Its interval: {@value #RESAMPLES} times, draw as many blocks as there are, with
 *       replacement, and take their median; the 2.5th and 97.5th percentiles of those medians. The
 *       random draws start from a fixed value, so the same turns always give the same interval.
 * </ol>
 */
final class PairedStats {

  static final int RESAMPLES = 4000;

  private PairedStats() {}

  /**
   * A figure and its interval.
   *
   * @param blocks how many blocks it rests on
   */
  record Estimate(double median, double low, double high, int blocks) {

    double halfWidth() {
      return (high - low) / 2;
    }
  }

  /**
   * A ratio of two variants in one cell, and the order effect: the median ratio over the halves of
   * the blocks where the design's turn came first, and over those where the reference's did. A
   * difference between the two beyond the interval is a bias of the order, not of the designs.
   */
  record Ratio(Estimate estimate, double designFirst, double referenceFirst) {}

  /** A variant's successful units per second in one cell: the median block rate. */
  static Optional<Estimate> rate(List<Turn> turns, String id, int threads, int keys) {
    Map<Integer, double[]> blocks = blockRates(turns, id, threads, keys, Turn::ok);
    if (blocks.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(estimate(blocks.values().stream().mapToDouble(r -> r[0]).toArray()));
  }

  /** A variant's attempts per second in one cell: the median block rate, without an interval. */
  static double attempts(List<Turn> turns, String id, int threads, int keys) {
    return median(
        blockRates(turns, id, threads, keys, Turn::attempts).values().stream()
            .mapToDouble(r -> r[0])
            .toArray());
  }

  /** {@code design / reference} in one cell, over the blocks where both ran. */
  static Optional<Ratio> ratio(
      List<Turn> turns, String design, String reference, int threads, int keys) {
    Map<Integer, double[]> a = blockRates(turns, design, threads, keys, Turn::ok);
    Map<Integer, double[]> b = blockRates(turns, reference, threads, keys, Turn::ok);
    List<Double> ratios = new ArrayList<>();
    List<Double> designFirst = new ArrayList<>();
    List<Double> referenceFirst = new ArrayList<>();
    for (Map.Entry<Integer, double[]> block : a.entrySet()) {
      double[] x = block.getValue();
      double[] y = b.get(block.getKey());
      if (y == null || y[0] <= 0) {
        continue;
      }
      ratios.add(x[0] / y[0]);
      // x[1], x[2]: the design's turn in the block's first and second half; its position in the
      // first half decides which order that half ran in, and the second half ran the other way.
      boolean designFirstInFirstHalf = x[3] < y[3];
      double firstHalf = y[1] > 0 ? x[1] / y[1] : Double.NaN;
      double secondHalf = y[2] > 0 ? x[2] / y[2] : Double.NaN;
      (designFirstInFirstHalf ? designFirst : referenceFirst).add(firstHalf);
      (designFirstInFirstHalf ? referenceFirst : designFirst).add(secondHalf);
    }
    if (ratios.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(
        new Ratio(
            estimate(ratios.stream().mapToDouble(Double::doubleValue).toArray()),
            median(designFirst.stream().mapToDouble(Double::doubleValue).toArray()),
            median(referenceFirst.stream().mapToDouble(Double::doubleValue).toArray())));
  }

  /**
   * Per block: {mean of the two turns, the first half's turn, the second half's turn, the first
   * turn's position}. A block with fewer than two turns (a variant that failed in it) is left out.
   */
  private static Map<Integer, double[]> blockRates(
      List<Turn> turns, String id, int threads, int keys, ToDoubleFunction<Turn> value) {
    Map<Integer, List<Turn>> byBlock = new TreeMap<>();
    for (Turn turn : turns) {
      if (turn.id().equals(id) && turn.threads() == threads && turn.keys() == keys) {
        byBlock.computeIfAbsent(turn.block(), b -> new ArrayList<>()).add(turn);
      }
    }
    Map<Integer, double[]> rates = new TreeMap<>();
    byBlock.forEach(
        (block, list) -> {
          if (list.size() == 2) {
            List<Turn> ordered =
                list.stream()
                    .sorted((p, q) -> Integer.compare(p.position(), q.position()))
                    .toList();
            double first = value.applyAsDouble(ordered.get(0));
            double second = value.applyAsDouble(ordered.get(1));
            rates.put(
                block,
                new double[] {(first + second) / 2, first, second, ordered.get(0).position()});
          }
        });
    return rates;
  }

  /** The median of {@code values} and its percentile-bootstrap 95 % interval. */
  static Estimate estimate(double[] values) {
    double median = median(values);
    if (values.length < 2) {
      return new Estimate(median, median, median, values.length);
    }
    SplittableRandom random = new SplittableRandom(20261203L);
    double[] medians = new double[RESAMPLES];
    double[] sample = new double[values.length];
    for (int r = 0; r < RESAMPLES; r++) {
      for (int i = 0; i < sample.length; i++) {
        sample[i] = values[random.nextInt(values.length)];
      }
      medians[r] = median(sample);
    }
    Arrays.sort(medians);
    return new Estimate(
        median,
        medians[(int) Math.floor(0.025 * (RESAMPLES - 1))],
        medians[(int) Math.ceil(0.975 * (RESAMPLES - 1))],
        values.length);
  }

  static double median(double[] values) {
    double[] sorted = Arrays.stream(values).filter(v -> !Double.isNaN(v)).sorted().toArray();
    if (sorted.length == 0) {
      return Double.NaN;
    }
    int mid = sorted.length / 2;
    return sorted.length % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  }
}
