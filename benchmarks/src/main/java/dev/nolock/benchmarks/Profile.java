package dev.nolock.benchmarks;

import java.time.Duration;
import java.util.List;

/**
 * How long and how wide a run is. {@link #SHORT} is the README's main command (under ten minutes on
 * two cores, build included); {@link #LONG} is {@code --long}.
 *
 * <p>The JMH benchmarks run paired ({@link Paired}): every variant in a JVM of its own, kept for
 * the whole run, measured in turns of {@link #turn} in palindromic blocks. Short turns in many
 * blocks beat long runs on a shared machine: the drift between two neighbouring turns is small, and
 * the interval narrows with the number of blocks. Measured on two cores, nolock's jOOQ-based
 * designs need several seconds of running in a fresh JVM before they reach their steady rate, raw
 * JDBC about two, hence an unmeasured turn of {@link #warmup} per variant before the blocks of the
 * first cell it runs in (5 s in the short profile, 10 s in the long one).
 *
 * @param name shown in the report
 * @param turn the length of one measured turn
 * @param blocks palindromic blocks per cell (each variant runs two turns per block)
 * @param warmup the unmeasured turn of each variant in the first cell it runs in (later cells begin
 *     with one unmeasured turn of {@link #turn})
 * @param threads the thread counts every design runs at
 * @param keys the key counts (1 is the hot key); the peers run at the same ones
 * @param peerThreads the thread counts the peer libraries run at
 * @param queueJobs jobs each queue drain harness processes (the decay check)
 * @param ownershipCommands commands the partitioned-ownership harness applies per variant
 * @param convoyPhase the length of the before and after phases of the convoy scenario
 * @param stall how long the stalled participant stops in the convoy scenario
 */
public record Profile(
    String name,
    Duration turn,
    int blocks,
    Duration warmup,
    List<Integer> threads,
    List<Integer> keys,
    List<Integer> peerThreads,
    int queueJobs,
    int ownershipCommands,
    Duration convoyPhase,
    Duration stall) {

  public static final Profile SHORT =
      new Profile(
          "short",
          Duration.ofMillis(250),
          6,
          Duration.ofSeconds(5),
          List.of(1, 4),
          List.of(1, 10_000),
          List.of(4),
          20_000,
          20_000,
          Duration.ofSeconds(3),
          Duration.ofSeconds(2));

  public static final Profile LONG =
      new Profile(
          "long",
          Duration.ofSeconds(1),
          12,
          Duration.ofSeconds(10),
          List.of(1, 4, 16),
          List.of(1, 16, 10_000),
          List.of(1, 4, 16),
          2_000_000,
          200_000,
          Duration.ofSeconds(10),
          Duration.ofSeconds(2));
}
