package dev.nolock.benchmarks;

import java.time.Duration;
import java.util.List;

/**
 * How long and how wide a run is. {@link #SHORT} is the README's main command (under ten minutes on
 * two cores after the build); {@link #LONG} is {@code --long}.
 *
 * <p>Why the short profile does not fork: measured on this machine, nolock's jOOQ-based designs
 * need about seven one-second iterations in a fresh JVM before they reach their steady rate (the
 * compiler threads share two cores with PostgreSQL and the benchmark), while raw JDBC is warm after
 * two. A fresh fork per benchmark with a short warm-up would compare cold library code against a
 * warm floor. So the short profile runs every benchmark in the runner's JVM ({@code forks = 0})
 * after a warm-up pass over all of them; the long profile forks each benchmark, as JMH recommends,
 * with a warm-up long enough for every design.
 *
 * @param name shown in the report
 * @param forks JMH forks per benchmark (0: in the runner's JVM, after {@link #prewarm} per variant)
 * @param prewarm with {@code forks = 0}, how long each variant runs, unmeasured, before any
 *     measurement starts
 * @param warmups JMH warm-up iterations (of {@link #warmup} each)
 * @param warmup the length of each warm-up iteration
 * @param iterations JMH measured iterations (of {@link #iteration} each)
 * @param iteration the length of each measured iteration
 * @param threads the thread counts every design runs at
 * @param keys the key counts (1 is the hot key)
 * @param peerKeys the key counts the peer libraries run at
 * @param queueJobs jobs each queue drain harness processes (the decay check)
 * @param ownershipCommands commands the partitioned-ownership harness applies per variant
 * @param convoyPhase the length of the before and after phases of the convoy scenario
 * @param stall how long the stalled participant stops in the convoy scenario
 */
public record Profile(
    String name,
    int forks,
    Duration prewarm,
    int warmups,
    Duration warmup,
    int iterations,
    Duration iteration,
    List<Integer> threads,
    List<Integer> keys,
    List<Integer> peerKeys,
    int queueJobs,
    int ownershipCommands,
    Duration convoyPhase,
    Duration stall) {

  public static final Profile SHORT =
      new Profile(
          "short",
          0,
          Duration.ofMillis(1500),
          2,
          Duration.ofSeconds(1),
          6,
          Duration.ofMillis(500),
          List.of(1, 4),
          List.of(1, 10_000),
          List.of(1),
          20_000,
          20_000,
          Duration.ofSeconds(3),
          Duration.ofSeconds(2));

  public static final Profile LONG =
      new Profile(
          "long",
          1,
          Duration.ZERO,
          10,
          Duration.ofSeconds(1),
          5,
          Duration.ofSeconds(2),
          List.of(1, 4, 16),
          List.of(1, 16, 10_000),
          List.of(1, 16, 10_000),
          2_000_000,
          200_000,
          Duration.ofSeconds(10),
          Duration.ofSeconds(2));
}
