package dev.nolock.schedule.internal;

import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduledRun;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Steps 1 and 2 of a pass (see {@link Engine}), also run by the loop's scan between passes: settle
 * what earlier passes left unknown, then take over the job's expired runs. Called under the {@link
 * Engine}'s monitor.
 */
final class Recovery {

  private static final Logger LOG = LoggerFactory.getLogger(Recovery.class);

  /** Expired runs taken over per scan, at most. */
  private static final int TAKEOVER_BATCH = 10;

  private final JobContext ctx;
  private final PassState state;
  private final Execution execution;

  Recovery(JobContext ctx, PassState state, Execution execution) {
    this.ctx = ctx;
    this.state = state;
    this.execution = execution;
  }

  /**
   * Settles what earlier passes left unknown, oldest first; an entry is dropped once PostgreSQL
   * answered about it (its outcome, if any, is then in {@code outcomes}, which are reported even if
   * this pass fails later). Runs a claim or takeover that landed, and a fenced finish that did not
   * commit; reports a finish's true outcome.
   */
  void settle(List<RunOutcome> outcomes) {
    for (PassState.Unknown entry : List.copyOf(state.unknown.values())) {
      if (state.closing) {
        return;
      }
      if (entry instanceof PassState.UnknownGrant grant) {
        settleGrant(grant, outcomes);
      } else if (entry instanceof PassState.UnknownFinish finish) {
        settleFinish(finish.run(), outcomes);
      }
    }
  }

  private void settleGrant(PassState.UnknownGrant grant, List<RunOutcome> outcomes) {
    Instant time = grant.scheduledAt();
    String what = grant.claim() ? "claim" : "takeover";
    // A claim's transaction holds the job's claim lock until it ends: taking it first waits for a
    // COMMIT still on its way to the server, so a claim that is landing is seen as landed, not
    // planned and claimed again (which would find its own row and never run it).
    Optional<RunTable.Claim> landed =
        ctx.backend(
            "settle the " + what + " of " + time,
            () ->
                ctx.dsl()
                    .transactionResult(
                        configuration -> {
                          DSLContext tx = configuration.dsl();
                          if (grant.claim() && ctx.checks().claimLock()) {
                            ctx.table().lockClaims(tx, ctx.job());
                          }
                          return resume(tx, time, grant.attempt());
                        }));
    state.unknown.remove(time);
    if (landed.isEmpty()) {
      return; // it never landed (the plan or the takeovers below try again), or is not ours now
    }
    LOG.info(
        "Job {}: the {} of {} had landed while its answer was lost; running attempt {}",
        ctx.job(),
        what,
        time,
        landed.get().attempt());
    if (grant.claim()) {
      if (state.lastPlanned == null || time.isAfter(state.lastPlanned)) {
        state.lastPlanned = time;
      }
      execution.claimed(landed.get(), grant.missed(), outcomes);
    } else {
      ctx.metrics().takenOver();
      outcomes.add(execution.run(landed.get()));
    }
  }

  /**
   * The true outcome of a finish whose answer was lost. A fenced finish cannot be sent again (the
   * job's writes were in its transaction): its attempt is resumed if it is still current, which
   * means the transaction did not commit (a transaction still open on the server holds the run's
   * row lock, so the {@code UPDATE} waits for it to commit or roll back), and the job runs again
   * with the same attempt; otherwise the run is read. A plain finish is sent again. The run read
   * answers {@link RunOutcome.Finished} when this attempt finished it, {@link
   * RunOutcome.StaleAttempt} when another attempt holds or finished it, and {@link
   * RunOutcome.NoLongerKnown} when retention deleted its row meanwhile.
   */
  private void settleFinish(ScheduledRun run, List<RunOutcome> outcomes) {
    Instant time = run.scheduledAt();
    long attempt = run.attempt().value();
    if (ctx.fenced()) {
      Optional<RunTable.Claim> again =
          ctx.backend(
              "settle the finish of " + time,
              () -> OwnTransaction.run(ctx.dsl(), d -> resume(d, time, attempt)));
      if (again.isPresent()) {
        state.unknown.remove(time);
        LOG.warn(
            "Job {}: the finish of {} attempt {} had not committed (its answer was lost) and its"
                + " writes rolled back; running the attempt again",
            ctx.job(),
            time,
            attempt);
        outcomes.add(execution.run(again.get()));
        return;
      }
    } else {
      boolean finished =
          ctx.backend(
              "finish " + time + " again",
              () -> OwnTransaction.run(ctx.dsl(), d -> execution.finish(d, run)));
      if (finished) {
        state.unknown.remove(time);
        ctx.metrics().finished();
        outcomes.add(new RunOutcome.Finished(run));
        return;
      }
    }
    Optional<RunTable.Current> current =
        ctx.backend(
            "read the run of " + time, () -> ctx.table().current(ctx.dsl(), ctx.job(), time));
    state.unknown.remove(time);
    if (current.isEmpty()) {
      // Retention deleted the row (it deletes finished runs only): this attempt's finish may be
      // the one that ended the run, or a later attempt's may. "Stale" would be a false answer.
      LOG.warn(
          "Job {}: the finish of {} attempt {} lost its answer, and the run's row is gone"
              + " (retention deleted the finished run): whether this attempt finished it is no"
              + " longer known",
          ctx.job(),
          time,
          attempt);
      outcomes.add(new RunOutcome.NoLongerKnown(run));
    } else if (current.get().finishedBy(attempt)) {
      ctx.metrics().finished();
      outcomes.add(new RunOutcome.Finished(run));
    } else {
      outcomes.add(execution.stale(run));
    }
  }

  private Optional<RunTable.Claim> resume(DSLContext dsl, Instant time, long attempt) {
    return ctx.table()
        .resumeAttempt(dsl, ctx.job(), time, attempt, ctx.identity(), ctx.config().lease());
  }

  /**
   * Takes over the job's expired runs, oldest first, and runs them; gives up those out of tries.
   */
  void takeOverExpired(List<RunOutcome> outcomes) {
    List<RunTable.Expired> expired =
        ctx.backend(
            "find expired runs", () -> ctx.table().expired(ctx.dsl(), ctx.job(), TAKEOVER_BATCH));
    int maxAttempts = ctx.config().maxAttempts();
    for (RunTable.Expired run : expired) {
      if (state.closing) {
        return;
      }
      Optional<RunTable.Claim> claim;
      try {
        claim =
            OwnTransaction.run(
                ctx.dsl(),
                d ->
                    ctx.table()
                        .takeOver(
                            d,
                            ctx.job(),
                            run.scheduledAt(),
                            ctx.identity(),
                            ctx.config().lease(),
                            maxAttempts));
      } catch (DataAccessException e) {
        // It may have landed: the next pass resumes it rather than wait out the lease it set.
        state.unknown.put(
            run.scheduledAt(),
            new PassState.UnknownGrant(
                run.scheduledAt(), run.attempt() + 1, false, Optional.empty()));
        throw ctx.unavailable("take over " + run.scheduledAt(), e);
      }
      if (claim.isPresent()) {
        ctx.metrics().takenOver();
        LOG.info(
            "Job {}: took over the run of {} with attempt {} (the lease of attempt {} expired)",
            ctx.job(),
            run.scheduledAt(),
            claim.get().attempt(),
            run.attempt());
        outcomes.add(execution.run(claim.get()));
        continue;
      }
      Optional<Long> gaveUp =
          ctx.backend(
              "give up " + run.scheduledAt(),
              () ->
                  OwnTransaction.run(
                      ctx.dsl(),
                      d -> ctx.table().giveUp(d, ctx.job(), run.scheduledAt(), maxAttempts)));
      if (gaveUp.isPresent()) {
        ctx.metrics().gaveUp();
        outcomes.add(new RunOutcome.GaveUp(run.scheduledAt(), gaveUp.get()));
      }
    }
  }
}
