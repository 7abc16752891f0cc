package dev.nolock.schedule.internal;

import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduleConfig;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Steps 3 to 5 of a pass (see {@link Engine}): the due time, the floor, the plan, and each planned
 * time claimed and run, or refused with the reason the claim's statement gives. Called under the
 * {@link Engine}'s monitor.
 */
final class Claims {

  private static final Logger LOG = LoggerFactory.getLogger(Claims.class);

  private final JobContext ctx;
  private final PassState state;
  private final Execution execution;

  Claims(JobContext ctx, PassState state, Execution execution) {
    this.ctx = ctx;
    this.state = state;
    this.execution = execution;
  }

  /** What a pass does after one claim. */
  private enum Step {
    /** Claim the plan's next slot. */
    NEXT,
    /** Stop: the time lies ahead of the database's clock, and the later slots do too. */
    STOP,
    /** Plan again from the table: a run committed since the floor was read lies before the slot. */
    REPLAN
  }

  /** Plans the times due now and claims them; appends each outcome as it happens. */
  void claimDue(List<RunOutcome> outcomes) {
    ScheduleConfig config = ctx.config();
    Instant now = config.clock().instant();
    Optional<Instant> dueTime = config.schedule().latestAtOrBefore(now).toJavaOptional();
    Instant lastPlanned = state.lastPlanned;
    if (state.refusedAhead != null
        && lastPlanned != null
        && !state.refusedAhead.isAfter(lastPlanned)) {
      state.refusedAhead = null; // granted, or handled otherwise
    }
    if (state.refusedAhead != null
        && (dueTime.isEmpty() || state.refusedAhead.isBefore(dueTime.get()))) {
      // A time refused as ahead stays the target until it is handled: planned again from the
      // wall clock, a clock further ahead than the tolerance plus one period would be refused a
      // new time at every pass and never run one.
      dueTime = Optional.of(state.refusedAhead);
    }
    if (dueTime.isEmpty() || (lastPlanned != null && !dueTime.get().isAfter(lastPlanned))) {
      return;
    }
    Instant due = dueTime.get();
    // Planned again when a claim found a run committed after the floor was read: the floor rises
    // past that run each time, so this ends.
    Step step = Step.REPLAN;
    while (step == Step.REPLAN && !state.closing) {
      Optional<Instant> previous =
          ctx.backend(
              "read the latest claimed run",
              () -> ctx.table().latestClaimedBefore(ctx.dsl(), ctx.job(), due));
      Instant floor = previous.orElse(ctx.startedAt());
      if (!due.isAfter(floor)) {
        state.lastPlanned = due;
        return; // no run in the table and due before this instance started
      }
      CatchUp.Plan plan =
          CatchUp.plan(
              config.schedule(),
              config.missedSchedules(),
              floor,
              due,
              ScheduleConfig.MAX_COUNTED_MISSED);
      step = Step.NEXT;
      // The latest time before the slot that the plan accounts for: the floor's run, then each
      // handled slot (which may have no row: refused as too old or superseded).
      Optional<Instant> known = previous;
      for (CatchUp.Slot slot : plan.slots()) {
        if (state.closing) {
          break;
        }
        Optional<RunOutcome.Missed> missed =
            slot.missedBefore() > 0
                ? Optional.of(
                    new RunOutcome.Missed(
                        slot.scheduledAt(),
                        plan.firstMissed().orElse(slot.scheduledAt()),
                        slot.missedBefore()))
                : Optional.empty();
        step = claimAndRun(slot, known, missed, outcomes);
        if (step != Step.NEXT) {
          break;
        }
        known = Optional.of(slot.scheduledAt());
      }
    }
  }

  /**
   * Claims one planned time and runs it, or learns from the same statement why not: the time's row
   * is there (another instance's claim, or this instance's own run), the job has a later run, or
   * the time lies outside the window around the database's clock. The time counts as handled
   * ({@link PassState#lastPlanned}) only once that answer is read, and never when it lies ahead of
   * the database's clock (it is claimed again when that clock reaches it) or when the job has a run
   * before the time that the plan did not know of ({@code known} is the latest it knew of): one
   * committed since the plan read the floor, planned again.
   */
  private Step claimAndRun(
      CatchUp.Slot slot,
      Optional<Instant> known,
      Optional<RunOutcome.Missed> missed,
      List<RunOutcome> outcomes) {
    Instant time = slot.scheduledAt();
    ScheduleConfig config = ctx.config();
    RunTable.ClaimDecision decision;
    try {
      decision =
          ctx.dsl()
              .transactionResult(
                  configuration -> {
                    DSLContext tx = configuration.dsl();
                    if (ctx.checks().claimLock()) {
                      ctx.table().lockClaims(tx, ctx.job());
                    }
                    return ctx.table()
                        .claim(
                            tx,
                            ctx.job(),
                            time,
                            ctx.identity(),
                            config.lease(),
                            config.claimWindow(),
                            config.clockTolerance(),
                            known,
                            slot.coversFrom(),
                            slot.missedBefore());
                  });
    } catch (DataAccessException e) {
      // It may have landed: the next pass resumes it (the table's floor now skips it) or, if it
      // did not, plans the time again, which stays unplanned here.
      state.unknown.put(time, new PassState.UnknownGrant(time, 1, true, missed));
      throw ctx.unavailable("claim " + time, e);
    }
    if (decision.granted().isPresent()) {
      state.lastPlanned = time;
      execution.claimed(decision.granted().get(), missed, outcomes);
      return Step.NEXT;
    }
    if (decision.ahead()) {
      // Not handled: the time is claimed again once the database's clock reaches it, and its
      // missed times are reported with that claim.
      state.aheadRetry =
          Duration.between(decision.databaseTime(), time.minus(config.clockTolerance()));
      if (!time.equals(state.refusedAhead)) {
        state.refusedAhead = time;
        refused(time, decision.databaseTime(), "further ahead than the clock tolerance", outcomes);
      }
      return Step.STOP;
    }
    // Before the too-old refusal: a stale plan's missed count would include the unplanned run.
    if (decision.existing().isEmpty()
        && decision.later().isEmpty()
        && decision.unplanned().isPresent()) {
      LOG.info(
          "Job {}: {} was claimed after this pass planned {} without it; planning again",
          ctx.job(),
          decision.unplanned().get(),
          time);
      return Step.REPLAN;
    }
    state.lastPlanned = time;
    if (decision.existing().isPresent()) {
      // This instance's own run (one it took over or resumed) was reported when it ran.
      if (!decision.existing().get().owner().equals(ctx.identity())) {
        ctx.metrics().skipped();
        outcomes.add(new RunOutcome.LostClaim(time));
      }
    } else if (decision.later().isPresent()) {
      // The later run's claim counted this slot's missed times; they are not reported again.
      ctx.metrics().superseded();
      LOG.warn(
          "Job {}: the database refused the claim of {}: the job already has a run of {}, so the"
              + " time was handled (run, counted missed, or its row deleted by retention) or lies"
              + " before the job's first run (made by an instance that started after it): this"
              + " instance's wall clock ({}) is behind the database's ({}), or another instance's"
              + " claims went ahead of it. Nothing ran",
          ctx.job(),
          time,
          decision.later().get(),
          config.clock().instant(),
          decision.databaseTime());
      outcomes.add(new RunOutcome.Superseded(time, decision.later().get()));
    } else if (decision.tooOld()) {
      missed.ifPresent(
          m -> {
            ctx.metrics().missed(m.count());
            outcomes.add(m);
          });
      refused(time, decision.databaseTime(), "further back than the claim window", outcomes);
    } else {
      // The insert met a row committed while the statement ran: another instance's claim (this
      // instance's own rows are all committed before it claims).
      ctx.metrics().skipped();
      outcomes.add(new RunOutcome.LostClaim(time));
    }
    return Step.NEXT;
  }

  private void refused(Instant time, Instant databaseTime, String why, List<RunOutcome> outcomes) {
    ctx.metrics().outsideWindow();
    LOG.warn(
        "Job {}: the database refused the claim of {}: it lies {} (back {}, ahead {}) from the"
            + " database's clock, {}, which this instance's wall clock reads as {}. Nothing ran;"
            + " fix this instance's clock (NTP)",
        ctx.job(),
        time,
        why,
        ctx.config().claimWindow(),
        ctx.config().clockTolerance(),
        databaseTime,
        ctx.config().clock().instant());
    outcomes.add(new RunOutcome.OutsideClaimWindow(time, databaseTime));
  }
}
