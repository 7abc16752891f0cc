package dev.nolock.schedule;

import dev.nolock.patterns.ErrorDescriber;
import java.time.Instant;
import java.util.Objects;

/**
 * What happened to one scheduled time during a pass of the scheduler: returned by {@link
 * ScheduledSingleton#runDueNow()} and passed to the {@link ScheduleConfig.Builder#onOutcome}
 * listener of the background loop. Races lost and stale finishes are values, not exceptions.
 */
public sealed interface RunOutcome {

  /** The scheduled time this outcome is about. */
  Instant scheduledAt();

  /**
   * This instance ran the job and its finish committed: the run's effect happened, once. When the
   * finish's answer was lost (the pass threw), the next pass reports it once it found the commit.
   */
  record Finished(ScheduledRun run) implements RunOutcome {
    public Finished {
      Objects.requireNonNull(run, "run");
    }

    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }
  }

  /**
   * Another instance had already claimed this time (the run's row carries another identity); this
   * instance did nothing for it. A time this instance ran itself (its own claim whose answer was
   * lost, or a takeover) is reported by that run's outcome only, never also as a lost claim.
   */
  record LostClaim(Instant scheduledAt) implements RunOutcome {
    public LostClaim {
      Objects.requireNonNull(scheduledAt, "scheduledAt");
    }
  }

  /**
   * Scheduled times that passed unclaimed and were not run, per the {@link MissedSchedules} policy.
   * Reported by the instance that claimed the run after them.
   *
   * @param scheduledAt the claimed run the missed times precede
   * @param firstMissed the earliest missed time
   * @param count how many were missed (counting stops at {@link ScheduleConfig#MAX_COUNTED_MISSED})
   */
  record Missed(Instant scheduledAt, Instant firstMissed, long count) implements RunOutcome {
    public Missed {
      Objects.requireNonNull(scheduledAt, "scheduledAt");
      Objects.requireNonNull(firstMissed, "firstMissed");
    }
  }

  /**
   * This instance ran the job but its attempt was no longer current when it finished: another
   * instance had taken the run over after the lease expired (reported by the next pass when the
   * finish's answer was lost and the run turned out taken over). A {@link FencedJob}'s writes were
   * rolled back; a {@link PlainJob}'s foreign effect happened and only that system's fence can
   * refuse it. ({@code StaleAttempt} is what every nolock module calls a refusal of an attempt that
   * a newer one has replaced.)
   */
  record StaleAttempt(ScheduledRun run) implements RunOutcome {
    public StaleAttempt {
      Objects.requireNonNull(run, "run");
    }

    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }
  }

  /**
   * This instance ran the job and sent its finish, whose answer was lost; by the time a later pass
   * asked, the run's row was gone, deleted by retention ({@link
   * ScheduledSingleton#purgeFinishedRunsOlderThan}, which deletes only finished runs) or by hand.
   * The run ended, but whether this attempt's finish is what ended it is no longer known: this is
   * neither {@link Finished} nor {@link StaleAttempt}, either of which could be false. A {@link
   * FencedJob}'s writes committed at most once for the time, with this attempt's finish or a later
   * attempt's; look at them to learn which. A retention that keeps runs longer than an outage of
   * this instance can last makes this rare.
   */
  record NoLongerKnown(ScheduledRun run) implements RunOutcome {
    public NoLongerKnown {
      Objects.requireNonNull(run, "run");
    }

    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }
  }

  /**
   * The job threw. A fenced job's writes were rolled back. The run was given back for another
   * attempt when {@code willRetry}; otherwise it is recorded as failed (its attempts ran out, or it
   * had already been taken over).
   *
   * <p>{@link #toString()} names the error by its class names only ({@link
   * ErrorDescriber#classNames()}), so that logging an outcome ({@code log.info("{}", outcome)})
   * does not write the data the exception's message carries; {@link #error()} is the exception
   * itself.
   */
  record Failed(ScheduledRun run, Exception error, boolean willRetry) implements RunOutcome {
    public Failed {
      Objects.requireNonNull(run, "run");
      Objects.requireNonNull(error, "error");
    }

    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }

    @Override
    public String toString() {
      return "Failed[run="
          + run
          + ", error="
          + ErrorDescriber.classNames().describe(error)
          + ", willRetry="
          + willRetry
          + "]";
    }
  }

  /**
   * The database refused this instance's claim of {@code scheduledAt}: the time lay further back
   * than {@link ScheduleConfig#claimWindow()} from the database's clock ({@code databaseTime}), or
   * further ahead than {@link ScheduleConfig#clockTolerance()}, so this instance's wall clock is
   * that far behind or ahead (or a catch-up reached back further than the window). Nothing ran here
   * for it; nothing was written. A time too far back is given up by this instance; a time ahead is
   * claimed again once the database's clock reaches it less the tolerance (reported once per
   * scheduled time; until then the instance claims no later time). Fix the clock (NTP).
   */
  record OutsideClaimWindow(Instant scheduledAt, Instant databaseTime) implements RunOutcome {
    public OutsideClaimWindow {
      Objects.requireNonNull(scheduledAt, "scheduledAt");
      Objects.requireNonNull(databaseTime, "databaseTime");
    }
  }

  /**
   * The database refused this instance's claim of {@code scheduledAt} because the job already has a
   * run of a later time, {@code laterClaimed}: {@code scheduledAt} was run, counted as missed by
   * that later claim, or its row deleted by retention. Nothing ran here; nothing was written. An
   * instance whose clock is behind sees this, as does an instance whose catch-up was overtaken by
   * another instance's later catch-up.
   */
  record Superseded(Instant scheduledAt, Instant laterClaimed) implements RunOutcome {
    public Superseded {
      Objects.requireNonNull(scheduledAt, "scheduledAt");
      Objects.requireNonNull(laterClaimed, "laterClaimed");
    }
  }

  /**
   * A run whose lease expired after its last allowed attempt (its instances crashed or hung every
   * time) was recorded as failed instead of being taken over again; {@code attempts} is the number
   * it had. An interrupted run is taken over whatever the age of its scheduled time.
   */
  record GaveUp(Instant scheduledAt, long attempts) implements RunOutcome {
    public GaveUp {
      Objects.requireNonNull(scheduledAt, "scheduledAt");
    }
  }
}
