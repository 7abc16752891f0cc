package dev.nolock.schedule.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.schedule.FencedJob;
import dev.nolock.schedule.PlainJob;
import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduleConfig;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * The scheduler of one job on one instance: the pass ({@link #runDueNow}) and the loop that runs it
 * at each scheduled time.
 *
 * <p>One pass, on the calling thread:
 *
 * <ol>
 *   <li><b>Unknown outcomes.</b> A claim, takeover or finish of this instance whose answer was lost
 *       (the pass threw {@link BackendUnavailableException}) is settled first, oldest first. A
 *       claim's settle first takes the job's claim lock ({@link RunTable#lockClaims}), so a claim
 *       whose {@code COMMIT} is still on its way is waited for. A claim or takeover that landed is
 *       resumed and run with the attempt it was granted ({@link RunTable#resumeAttempt}), also
 *       after its lease ran out, since this instance knows it never ran it. A fenced finish that
 *       committed is {@code Finished}; one that did not (its writes rolled back) is resumed the
 *       same way and run again with the same attempt, so a lost {@code COMMIT} spends no attempt; a
 *       plain finish is sent again (never the job); a finish of an attempt taken over meanwhile is
 *       {@code StaleAttempt}; one whose run retention deleted meanwhile is {@code NoLongerKnown}.
 *   <li><b>Takeovers.</b> Running runs of the job whose lease expired on the database's clock are
 *       claimed again with the next attempt ({@link RunTable#takeOver}) and run, whatever their
 *       age; those out of attempts are recorded as failed.
 *   <li><b>The due time.</b> {@code due} is the latest scheduled time at or before the wall clock's
 *       now, or the time the database last refused as ahead of its clock if that is earlier and not
 *       handled yet. Nothing happens when this instance already handled it: claimed it, or lost its
 *       claim to another instance. A claim that failed (the database unreachable for a moment)
 *       handles nothing, so the next pass, which the loop retries with backoff, plans the time
 *       again.
 *   <li><b>The plan.</b> The floor is the latest run of the job claimed before {@code due} in the
 *       table (the instance's start when there is none); {@link CatchUp} turns floor, due and the
 *       missed-schedules policy into the times to claim. A claim of this instance that landed with
 *       its answer lost is in the table, so the plan starts after it: step 1 ran it first.
 *   <li><b>Claim and run</b>, oldest first, one at a time, in a transaction that first takes the
 *       job's claim lock ({@link RunTable#lockClaims}), so the claims of a job decide one after the
 *       other, then one statement ({@link RunTable#claim}) that inserts the run only if its row is
 *       absent, the job has no run of a later time, and {@code clock_timestamp() - :window <= :t <=
 *       clock_timestamp() + :tolerance}, and returns which of these held. Its row was there:
 *       another identity's is a lost claim, counted and reported; this instance's own (a run it
 *       took over or resumed above) was reported when it ran. A later run: {@code Superseded}. Too
 *       far back: {@code OutsideClaimWindow} with the slot's {@code Missed}, given up. Too far
 *       ahead: {@code OutsideClaimWindow} once, the time not handled, the pass ends, the next wake
 *       comes when the database's clock reaches the time less the tolerance, and passes claim that
 *       time (not a later one read from the wall clock) until it is handled. A won claim runs the
 *       job while a second thread renews the lease every third of it, then finishes the run
 *       conditionally on the attempt.
 * </ol>
 *
 * <p>Every outcome is reported once. A pass that throws after it produced outcomes (it ran a time,
 * then a later statement failed) keeps them, and the next pass that returns (or scan that
 * completes) reports them first, so a run that happened is never reported by no one.
 *
 * <p>The parts: {@link Recovery} (steps 1 and 2), {@link Claims} (steps 3 to 5), {@link Execution}
 * (running and finishing an attempt) with {@link Renewals} (its lease), and {@link Loop} (the timer
 * and the lifecycle), and {@link Retention} (deleting finished runs no claim needs); what an
 * instance remembers between passes is in {@link PassState}, guarded by this object's monitor.
 */
public final class Engine implements AutoCloseable {

  private final JobContext ctx;
  private final PassState state = new PassState();
  private final Recovery recovery;
  private final Claims claims;
  private final Loop loop;
  private final Retention retention;

  /**
   * The checks the tests' negative controls switch off, each true in production: the attempt in a
   * finish, the attempt in a renewal, the job's claim lock, and what retention keeps.
   */
  public record Checks(
      boolean attemptCheck,
      boolean renewalAttemptCheck,
      boolean claimLock,
      boolean retentionGuards) {}

  /** When the loop wakes next, as far as what the passes learnt says. */
  record NextWake(Instant from, Duration untilAheadDue) {}

  /**
   * @param identity stored in this instance's claims: the configured owner plus a nonce
   * @param fencedJob exactly one of the two jobs is non-null
   */
  public Engine(
      DataSource dataSource,
      ScheduleConfig config,
      String identity,
      Checks checks,
      FencedJob fencedJob,
      PlainJob plainJob,
      ScheduleMetrics metrics) {
    if ((fencedJob == null) == (plainJob == null)) {
      throw new IllegalArgumentException("Pass exactly one job, fenced or plain");
    }
    this.ctx =
        new JobContext(
            config,
            identity,
            checks,
            fencedJob,
            plainJob,
            DSL.using(dataSource, SQLDialect.POSTGRES),
            new RunTable(config.table(), config.queryTimeout()),
            metrics,
            config.clock().instant());
    Renewals renewals = new Renewals(ctx);
    Execution execution = new Execution(ctx, state, renewals);
    this.recovery = new Recovery(ctx, state, execution);
    this.claims = new Claims(ctx, state, execution);
    this.loop = new Loop(ctx, state, this, renewals);
    this.retention = new Retention(ctx);
  }

  /**
   * Creates the runs table and its index unless they exist; refuses an existing table it cannot use
   * ({@link RunTable#createIfMissing}).
   */
  public void createTableIfMissing() {
    ctx.backend(
        "create the runs table",
        () -> {
          ctx.table().createIfMissing(ctx.dsl());
          return null;
        });
  }

  /** The DDL, as SQL text, one statement per element. */
  public List<String> ddl() {
    return ctx.table().ddlSql(ctx.dsl());
  }

  /**
   * One pass; see the class comment. Returns the outcomes of earlier passes that threw first.
   *
   * @throws BackendUnavailableException when a statement failed; what the pass had done is reported
   *     by the next pass that returns
   * @throws IllegalStateException when PostgreSQL refused a statement in a way a retry would repeat
   *     ({@link dev.nolock.patterns.sql.SqlErrors#translate}); handled like the above
   */
  public synchronized List<RunOutcome> runDueNow() {
    if (state.closing) {
      throw new IllegalStateException(
          "The scheduler of job \"" + ctx.job() + "\" is closed: create a new one to run passes.");
    }
    recovery.settle(state.unreported);
    recovery.takeOverExpired(state.unreported);
    claims.claimDue(state.unreported);
    return state.drainUnreported();
  }

  /** The loop's scan between passes: steps 1 and 2 only. Empty once closing. */
  synchronized List<RunOutcome> scan() {
    if (state.closing) {
      return List.of();
    }
    recovery.settle(state.unreported);
    recovery.takeOverExpired(state.unreported);
    return state.drainUnreported();
  }

  /**
   * Where the loop looks for the next scheduled time (the latest handled time when it lies ahead of
   * {@code now}), and how long until a time refused as ahead is due by the database (taken: once).
   */
  synchronized NextWake nextWake(Instant now) {
    Instant from =
        state.lastPlanned != null && state.lastPlanned.isAfter(now) ? state.lastPlanned : now;
    Duration untilDue = state.aheadRetry;
    state.aheadRetry = null;
    return new NextWake(from, untilDue);
  }

  /**
   * Deletes the job's finished runs that no claim needs; see {@link Retention}. Independent of
   * passes: it may run while one is in flight.
   *
   * @param age validated by the caller: not negative, at most the longest claim window
   * @return the rows deleted
   * @throws BackendUnavailableException when a statement failed; the batches before it stay deleted
   */
  public long purgeFinishedRunsOlderThan(Duration age) {
    return retention.purgeFinishedRunsOlderThan(age);
  }

  /** Starts the background loop. */
  public void start() {
    loop.start();
  }

  /**
   * Stops the loop: no new pass starts, a running job is waited for up to the shutdown timeout (its
   * lease is renewed meanwhile), then interrupted. Idempotent.
   */
  @Override
  public void close() {
    loop.close();
  }
}
