package dev.nolock.benchmarks;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Pattern;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * One variant's JVM in a paired run ({@link Paired}). The variant keeps this JVM, and so its JIT
 * profile, for the whole run; no other variant's code ever runs in it. Each turn is one JMH trial,
 * run in-process: its {@code @Setup(Level.Trial)} builds the variant's tables afresh (the reset
 * before every turn), one short unmeasured iteration opens the pool's connections and lets pgjdbc
 * prepare its statements, then one measured iteration.
 *
 * <p>Why a trial per turn rather than an iteration per turn: JMH's threads spin while one of them
 * runs an iteration-level setup, so a worker held between iterations would burn the cores the
 * measured variant needs. Between trials the worker blocks on its input.
 *
 * <p>The protocol, a line each way: {@code turn CLASS METHOD THREADS KEYS MILLIS} is answered by
 * {@code @@turn OK ATTEMPTS} (units and attempts per second) or {@code @@failed REASON}; {@code
 * quit} (or the end of the input) ends the JVM.
 */
public final class TurnWorker {

  /** The system property that makes this JVM a worker. */
  static final String ACTIVE = "nolock.bench.turns";

  static final String TURN = "@@turn ";
  static final String FAILED = "@@failed ";

  /** The unmeasured iteration before each turn's measured one. */
  static final long WARM_MILLIS = 100;

  private TurnWorker() {}

  /** Whether this JVM is a worker of a paired run (some benchmarks keep state across turns). */
  static boolean active() {
    return Boolean.getBoolean(ACTIVE);
  }

  /**
   * A trial's teardown work. JMH's other threads wait for a trial's teardown in sleeps of a second
   * (its back-off), so in a worker the work runs after the trial instead, outside JMH; elsewhere
   * now.
   */
  static void afterTrial(Runnable close) {
    if (active()) {
      AFTER_TRIAL.add(close);
    } else {
      close.run();
    }
  }

  private static final List<Runnable> AFTER_TRIAL = new CopyOnWriteArrayList<>();

  public static void main(String[] args) throws Exception {
    System.setProperty("org.jooq.no-logo", "true");
    System.setProperty("org.jooq.no-tips", "true");
    if (!active()) {
      throw new IllegalStateException("start with -D" + ACTIVE + "=true (Paired does)");
    }
    // JMH and the libraries print to System.out too; the protocol keeps the real stdout.
    PrintStream protocol = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    System.setOut(System.err);
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null && !line.equals("quit"); line = in.readLine()) {
      protocol.println(turn(line.split(" ")));
    }
    // The clients a worker keeps (Redisson's, Lettuce's) have threads that would keep the JVM
    // alive; exiting runs the hooks that drop the worker's schemas and tables.
    System.exit(0);
  }

  private static String turn(String[] turn) {
    String benchmark = turn[1] + "." + turn[2];
    try {
      OptionsBuilder options = new OptionsBuilder();
      options
          .include(Pattern.quote(benchmark) + "$")
          .forks(0)
          .threads(Integer.parseInt(turn[3]))
          .warmupIterations(1)
          .warmupTime(TimeValue.milliseconds(WARM_MILLIS))
          .measurementIterations(1)
          .measurementTime(TimeValue.milliseconds(Long.parseLong(turn[5])))
          .param("keys", turn[4])
          .verbosity(VerboseMode.SILENT);
      Collection<RunResult> results;
      try {
        results = new Runner(options.build()).run();
      } finally {
        AFTER_TRIAL.forEach(Runnable::run);
        AFTER_TRIAL.clear();
      }
      List<IterationResult> measured =
          results.stream()
              .flatMap(r -> r.getBenchmarkResults().stream())
              .flatMap(r -> r.getIterationResults().stream())
              .toList();
      if (measured.size() != 1) {
        return FAILED + benchmark + " measured nothing; its error is in the worker log";
      }
      IterationResult result = measured.get(0);
      return String.format(
          Locale.ROOT,
          "%s%.3f %.3f",
          TURN,
          result.getSecondaryResults().get("ok").getScore(),
          result.getPrimaryResult().getScore());
    } catch (Exception e) {
      return FAILED + e.toString().replace('\n', ' ');
    }
  }
}
