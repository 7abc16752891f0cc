package dev.nolock.schedule;

/**
 * A job whose effect is outside the scheduler's database (an HTTP call, a message, a file).
 *
 * <p>The claim guarantees that one instance at a time holds the run while its lease lasts, not that
 * the effect happens once: an instance paused past its lease can resume and act after another
 * instance has taken the run over. Pass {@link ScheduledRun#attempt()} and {@link
 * ScheduledRun#fenceKey()} to the system you write to, so that it refuses the older attempt, or use
 * {@link ScheduledRun#fenceKey()} as an idempotency key when the effect is the same for every
 * attempt. After the job returns the run is finished with the same conditional update as a {@link
 * FencedJob}; a refused finish is reported and counted, but the foreign effect has already
 * happened.
 *
 * <p>The job may throw any exception, checked ones included: the attempt has failed, the run is
 * given back for a retry (up to {@link ScheduleConfig#maxAttempts()}) and the failure is reported
 * as {@link RunOutcome.Failed} carrying that exception; the scheduler goes on with its next times.
 */
@FunctionalInterface
public interface PlainJob {

  /** Runs the job for {@code run}. */
  void run(ScheduledRun run) throws Exception;
}
