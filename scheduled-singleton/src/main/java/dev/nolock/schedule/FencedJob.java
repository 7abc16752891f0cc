package dev.nolock.schedule;

import org.jooq.DSLContext;

/**
 * A job whose effect is writes to the scheduler's PostgreSQL database, made exactly once per
 * scheduled time.
 *
 * <p>{@code tx} is the transaction that also finishes the run: after the job returns, the scheduler
 * runs {@code UPDATE runs SET state = 'done' WHERE job = :job AND scheduled_at = :t AND attempt =
 * :attempt AND state = 'running'} on it and commits. If that matches no row (the run was taken over
 * by another instance while this one was paused or slow), everything the job wrote is rolled back.
 * Write only through {@code tx}; work done on other connections or in other systems is not fenced
 * (use a {@link PlainJob} and pass the attempt token there).
 *
 * <p>The job may throw any exception, checked ones included: its writes roll back, the run is given
 * back for a retry (up to {@link ScheduleConfig#maxAttempts()}) and the failure is reported as
 * {@link RunOutcome.Failed} carrying that exception; the scheduler goes on with its next times.
 */
@FunctionalInterface
public interface FencedJob {

  /** Runs the job for {@code run}, writing through {@code tx}. */
  void run(ScheduledRun run, DSLContext tx) throws Exception;
}
