package dev.nolock.schedule;

import dev.nolock.patterns.FencingToken;
import java.time.Instant;
import java.util.Objects;

/**
 * One claimed run of a job, handed to the job: which scheduled time it is, and the attempt token
 * that fences its writes.
 *
 * <p>A run is identified by {@code (job, scheduledAt)}. Its {@code attempt} starts at 1 when an
 * instance claims the time and is bumped by every takeover (after a crash or a pause past the
 * lease) and every retry (after the job threw), so it strictly increases per run. A fenced job's
 * writes commit only together with the finish of the current attempt; a plain job passes {@link
 * #attempt()} (with {@link #fenceKey()}) to the system it writes to, which must refuse an attempt
 * lower than one it has already accepted for that key.
 *
 * @param job the job name
 * @param scheduledAt the scheduled time this run is for (whole seconds)
 * @param attempt the attempt token, at least 1
 * @param owner the identity of the instance running this attempt ({@link
 *     ScheduledSingleton#identity()}: the configured owner plus a nonce per instance)
 * @param coversFrom the earliest scheduled time this run stands for: {@code scheduledAt}, or, for a
 *     {@link MissedSchedules#runOnce()} catch-up, the first missed time
 * @param missedBefore how many scheduled times before this run were missed and not run (for a
 *     run-once catch-up: how many it stands for besides its own)
 */
public record ScheduledRun(
    String job,
    Instant scheduledAt,
    FencingToken attempt,
    String owner,
    Instant coversFrom,
    long missedBefore) {

  public ScheduledRun {
    Objects.requireNonNull(job, "job");
    Objects.requireNonNull(scheduledAt, "scheduledAt");
    Objects.requireNonNull(attempt, "attempt");
    Objects.requireNonNull(owner, "owner");
    Objects.requireNonNull(coversFrom, "coversFrom");
    if (missedBefore < 0) {
      throw new IllegalArgumentException("missedBefore must not be negative, got " + missedBefore);
    }
  }

  /**
   * A key for fencing this run in another system, {@code "<job>@<scheduledAt>"} (ISO-8601): a fence
   * there remembers the highest {@link #attempt()} per key. Attempts are per run, so a fence keyed
   * by the job name alone would compare attempts of different scheduled times.
   */
  public String fenceKey() {
    return job + "@" + scheduledAt;
  }

  /** True when an earlier attempt of this run was taken over or retried. */
  public boolean isRetry() {
    return attempt.value() > 1;
  }
}
