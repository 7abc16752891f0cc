package dev.nolock.benchmarks;

import java.util.List;
import java.util.function.Consumer;

/** A measurement that runs outside JMH, in the runner's own JVM, against the same servers. */
public interface Harness {

  /** What the report calls it. */
  String title();

  /**
   * Runs every variant once.
   *
   * @param progress one line per step, shown as the run goes
   * @throws Exception when a server is unavailable; the runner reports the harness as skipped with
   *     the exception's message
   */
  List<HarnessResult> run(Profile profile, Consumer<String> progress) throws Exception;
}
