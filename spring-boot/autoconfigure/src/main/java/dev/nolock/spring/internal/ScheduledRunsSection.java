package dev.nolock.spring.internal;

import dev.nolock.schedule.RunOutcome;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The {@code scheduledRuns} section of the {@code nolock} endpoint: per {@code @FencedScheduled}
 * job, what this instance saw of its latest scheduled times (ran it, lost the claim to another
 * instance, missed, failed, ...), newest first, with the attempt where there was one.
 */
public final class ScheduledRunsSection implements NolockSection {

  /** How many outcomes are kept per job. */
  public static final int KEPT = 20;

  private final Map<String, Deque<Run>> runs = new TreeMap<>();

  @Override
  public String name() {
    return "scheduledRuns";
  }

  /** Keeps {@code outcome} of {@code job}, dropping the oldest past {@link #KEPT}. */
  public synchronized void record(String job, RunOutcome outcome) {
    Deque<Run> kept = runs.computeIfAbsent(job, any -> new ArrayDeque<>());
    Long attempt =
        outcome instanceof RunOutcome.Finished f
            ? Long.valueOf(f.run().attempt().value())
            : outcome instanceof RunOutcome.Failed failed
                ? Long.valueOf(failed.run().attempt().value())
                : null;
    kept.addFirst(
        new Run(outcome.scheduledAt(), outcome.getClass().getSimpleName(), attempt, Instant.now()));
    while (kept.size() > KEPT) {
      kept.removeLast();
    }
  }

  @Override
  public synchronized Object report() {
    Map<String, List<Run>> report = new TreeMap<>();
    runs.forEach((job, kept) -> report.put(job, new ArrayList<>(kept)));
    return report;
  }

  /**
   * One outcome.
   *
   * @param scheduledAt the scheduled time
   * @param outcome what happened, as {@link RunOutcome}'s type names it ({@code Finished}, {@code
   *     LostClaim}, {@code Missed}, {@code Failed}, ...)
   * @param attempt the attempt token when this instance ran it, else null
   * @param seenAt when this instance saw it, on its own clock
   */
  public record Run(Instant scheduledAt, String outcome, Long attempt, Instant seenAt) {}
}
