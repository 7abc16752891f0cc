package dev.nolock.schedule.internal;

import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.schedule.FencedJob;
import dev.nolock.schedule.PlainJob;
import dev.nolock.schedule.ScheduleConfig;
import java.time.Instant;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * What every part of one job's scheduler on one instance reads: the configuration (read from the
 * {@link ScheduleConfig} itself, never copied), the instance's identity, the job, the database and
 * the meters. Immutable.
 *
 * @param identity stored in this instance's claims: the configured owner plus a nonce per instance
 * @param checks the switches the tests' negative controls turn off
 * @param fencedJob the job, when its writes go through the finishing transaction; else null
 * @param plainJob the job, when its effects are elsewhere; else null
 * @param startedAt the wall clock's time when the instance was made: the floor of a job with no run
 */
record JobContext(
    ScheduleConfig config,
    String identity,
    Engine.Checks checks,
    FencedJob fencedJob,
    PlainJob plainJob,
    DSLContext dsl,
    RunTable table,
    ScheduleMetrics metrics,
    Instant startedAt) {

  String job() {
    return config.job();
  }

  boolean fenced() {
    return fencedJob != null;
  }

  /**
   * Runs {@code call}; a database failure becomes the shared translation's exception ({@link
   * SqlErrors#translate}): {@link dev.nolock.patterns.BackendUnavailableException} when a retry can
   * succeed (the connection, a timeout, a concurrent transaction), else an {@link
   * IllegalStateException} or {@link IllegalArgumentException} that says what to fix.
   */
  <T> T backend(String step, Supplier<T> call) {
    return SqlErrors.run(() -> doing(step), call);
  }

  /** {@link #backend}'s exception for {@code e}, thrown while trying to {@code step}. */
  RuntimeException unavailable(String step, DataAccessException e) {
    return SqlErrors.translate(e, doing(step));
  }

  private String doing(String step) {
    return "scheduling job \""
        + job()
        + "\": could not "
        + step
        + " (retry later; the run's lease decides what happens to a run in flight)";
  }
}
