package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.benchmarks.Paired.Turn;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The benchmark's smoke in CI: a tiny paired run of the CAS store and its floor against the real
 * PostgreSQL, through the workers' JVMs and their protocol, turns in palindromic order.
 */
class PairedIT {

  private static final Profile TINY =
      new Profile(
          "tiny",
          Duration.ofMillis(100),
          2,
          Duration.ofMillis(200),
          List.of(2),
          List.of(100),
          List.of(2),
          0,
          0,
          Duration.ZERO,
          Duration.ZERO);

  @Test
  void twoVariantsTakeTheirTurnsInPalindromicBlocks(@TempDir Path dir) throws Exception {
    Map<String, String> failed = new LinkedHashMap<>();
    Path log = dir.resolve("workers.log");

    List<Turn> turns =
        Paired.run(
            CasBenchmark.class,
            List.of(Catalog.require("casVersionColumnStore"), Catalog.require("casRawJdbc")),
            List.<int[]>of(new int[] {2, 100}),
            TINY,
            Main.workerJvmArgs(),
            log,
            failed,
            line -> {});

    assertThat(failed).as("failed variants (their output: %s)", readable(log)).isEmpty();
    assertThat(turns)
        .extracting(Turn::block, Turn::position, Turn::id)
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple(0, 0, "casVersionColumnStore"),
            org.assertj.core.groups.Tuple.tuple(0, 1, "casRawJdbc"),
            org.assertj.core.groups.Tuple.tuple(0, 2, "casRawJdbc"),
            org.assertj.core.groups.Tuple.tuple(0, 3, "casVersionColumnStore"),
            org.assertj.core.groups.Tuple.tuple(1, 0, "casRawJdbc"),
            org.assertj.core.groups.Tuple.tuple(1, 1, "casVersionColumnStore"),
            org.assertj.core.groups.Tuple.tuple(1, 2, "casVersionColumnStore"),
            org.assertj.core.groups.Tuple.tuple(1, 3, "casRawJdbc"));
    assertThat(turns).allSatisfy(turn -> assertThat(turn.ok()).isPositive());
    assertThat(PairedStats.ratio(turns, "casVersionColumnStore", "casRawJdbc", 2, 100))
        .hasValueSatisfying(r -> assertThat(r.estimate().blocks()).isEqualTo(2));
  }

  private static String readable(Path log) throws Exception {
    return Files.exists(log) ? Files.readString(log) : "none";
  }
}
