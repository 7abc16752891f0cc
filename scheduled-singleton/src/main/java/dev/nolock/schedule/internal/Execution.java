package dev.nolock.schedule.internal;

import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduledRun;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Runs a granted attempt and finishes it:
 *
 * <ol>
 *   <li>start renewing the lease ({@link Renewals});
 *   <li>run the job: a fenced job inside the transaction that then finishes the run conditionally
 *       on the attempt ({@link RunTable#finish}), rolled back when that matches no row; a plain job
 *       first, then the finish in a transaction of its own;
 *   <li>stop renewing before the finish, release or failure is sent, so that statement decides;
 *   <li>a job that threw gives its run back for a retry ({@link RunTable#release}) or, on its last
 *       attempt, records it failed ({@link RunTable#fail}).
 * </ol>
 *
 * A finish whose answer was lost is remembered in {@link PassState#unknown} for the next pass.
 */
final class Execution {

  private static final Logger LOG = LoggerFactory.getLogger(Execution.class);

  private final JobContext ctx;
  private final PassState state;
  private final Renewals renewals;

  Execution(JobContext ctx, PassState state, Renewals renewals) {
    this.ctx = ctx;
    this.state = state;
    this.renewals = renewals;
  }

  /** Reports and runs a claim this instance won (directly, or found landed after a lost answer). */
  void claimed(
      RunTable.Claim claim, Optional<RunOutcome.Missed> missed, List<RunOutcome> outcomes) {
    ctx.metrics().claimed(Duration.between(claim.scheduledAt(), ctx.config().clock().instant()));
    missed.ifPresent(
        m -> {
          ctx.metrics().missed(m.count());
          outcomes.add(m);
        });
    outcomes.add(run(claim));
  }

  /** Runs a claimed attempt with its lease renewed, and finishes it. */
  RunOutcome run(RunTable.Claim claim) {
    ScheduledRun run =
        new ScheduledRun(
            ctx.job(),
            claim.scheduledAt(),
            FencingToken.of(claim.attempt()),
            ctx.identity(),
            claim.coversFrom(),
            claim.missed());
    Runnable stopRenewal = renewals.start(run);
    long started = System.nanoTime();
    try {
      return ctx.fenced() ? runFenced(run, stopRenewal) : runPlain(run, stopRenewal);
    } finally {
      stopRenewal.run();
      ctx.metrics().ran(Duration.ofNanos(System.nanoTime() - started));
    }
  }

  /**
   * {@code stopRenewal} runs before the finish, release or failure is sent: from then on that
   * statement decides, and a renewal still queued is not sent (one already on its way is refused by
   * the released marker, see {@link RunTable#renew}).
   */
  private RunOutcome runFenced(ScheduledRun run, Runnable stopRenewal) {
    try {
      ctx.dsl()
          .transaction(
              configuration -> {
                DSLContext tx = configuration.dsl();
                try {
                  ctx.fencedJob().run(run, tx);
                } catch (Exception e) {
                  throw new JobThrew(e);
                }
                stopRenewal.run(); // the finish decides now; a renewal from here on proves nothing
                if (!finish(tx, run)) {
                  throw new RefusedFinish();
                }
              });
    } catch (RefusedFinish e) {
      return stale(run);
    } catch (JobThrew e) {
      return failed(run, e.getCause(), stopRenewal);
    } catch (DataAccessException e) {
      throw unknownFinish(run, e);
    }
    ctx.metrics().finished();
    return new RunOutcome.Finished(run);
  }

  private RunOutcome runPlain(ScheduledRun run, Runnable stopRenewal) {
    try {
      ctx.plainJob().run(run);
    } catch (Exception e) {
      return failed(run, e, stopRenewal);
    }
    stopRenewal.run();
    boolean finished;
    try {
      finished = OwnTransaction.run(ctx.dsl(), d -> finish(d, run));
    } catch (DataAccessException e) {
      throw unknownFinish(run, e);
    }
    if (!finished) {
      return stale(run);
    }
    ctx.metrics().finished();
    return new RunOutcome.Finished(run);
  }

  /** {@link RunTable#finish} of {@code run}'s attempt; false when the attempt is stale. */
  boolean finish(DSLContext dsl, ScheduledRun run) {
    return ctx.table()
        .finish(
            dsl, ctx.job(), run.scheduledAt(), run.attempt().value(), ctx.checks().attemptCheck());
  }

  RunOutcome stale(ScheduledRun run) {
    ctx.metrics().staleFinish();
    LOG.warn(
        "Job {}: the finish of {} attempt {} was refused: another instance took the run over"
            + " while this one was paused or slow{}",
        ctx.job(),
        run.scheduledAt(),
        run.attempt().value(),
        ctx.fenced() ? "; its writes were rolled back" : "");
    return new RunOutcome.StaleAttempt(run);
  }

  private RunOutcome failed(ScheduledRun run, Throwable thrown, Runnable stopRenewal) {
    stopRenewal.run();
    Exception error = thrown instanceof Exception e ? e : new RuntimeException(thrown);
    boolean interrupted = error instanceof InterruptedException;
    ctx.metrics().failed();
    boolean retry = run.attempt().value() < ctx.config().maxAttempts();
    // The describer's text, not the exception: its message carries the data the job worked on.
    String message = ErrorDescriber.describe(ctx.config().errorDescriber(), error);
    boolean recorded = false;
    try {
      recorded =
          OwnTransaction.run(
              ctx.dsl(),
              d ->
                  retry
                      ? ctx.table()
                          .release(d, ctx.job(), run.scheduledAt(), run.attempt().value(), message)
                      : ctx.table()
                          .fail(d, ctx.job(), run.scheduledAt(), run.attempt().value(), message));
    } catch (DataAccessException e) {
      error.addSuppressed(e);
      recorded = retry; // the lease runs out and a takeover retries it anyway
      LOG.warn(
          "Job {}: could not record that attempt {} of {} threw; when its lease runs out a"
              + " takeover retries the run or gives it up",
          ctx.job(),
          run.attempt().value(),
          run.scheduledAt(),
          e);
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    LOG.warn(
        "Job {}: attempt {} of {} threw {}; {}",
        ctx.job(),
        run.attempt().value(),
        run.scheduledAt(),
        message,
        retry && recorded ? "it will be retried" : "the run is recorded as failed");
    return new RunOutcome.Failed(run, error, retry && recorded);
  }

  /** Remembers {@code run}'s finish as unknown, for the next pass to find out, and says so. */
  private RuntimeException unknownFinish(ScheduledRun run, DataAccessException e) {
    state.unknown.put(run.scheduledAt(), new PassState.UnknownFinish(run));
    return ctx.unavailable(
        "finish "
            + run.scheduledAt()
            + " (whether it committed is unknown; the next pass finds out)",
        e);
  }

  /** Carries the job's exception out of the transaction, which rolls back. */
  private static final class JobThrew extends RuntimeException {
    private static final long serialVersionUID = 1L;

    JobThrew(Exception cause) {
      super(cause);
    }
  }

  /** Makes the transaction roll back when the finish matched no row. */
  private static final class RefusedFinish extends RuntimeException {
    private static final long serialVersionUID = 1L;

    RefusedFinish() {
      super("stale attempt", null, false, false);
    }
  }
}
