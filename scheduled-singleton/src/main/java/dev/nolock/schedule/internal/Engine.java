package dev.nolock.schedule.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.FencedJob;
import dev.nolock.schedule.MissedSchedules;
import dev.nolock.schedule.PlainJob;
import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduledRun;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 *       {@code StaleFinish}.
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
 * <p>The loop is a single-threaded {@link ScheduledExecutorService}: it wakes at the next scheduled
 * time (a delay computed from the wall clock, at most a minute, re-checked on waking), runs a pass
 * and schedules the next wake; between wakes it scans for expired runs every lease. A failed pass
 * is retried with backoff. Nothing spins.
 */
public final class Engine implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(Engine.class);

  /** The longest the loop sleeps before it reads the wall clock again. */
  private static final Duration MAX_SLEEP = Duration.ofMinutes(1);

  /** Expired runs taken over per scan, at most. */
  private static final int TAKEOVER_BATCH = 10;

  private final String job;
  private final CronSchedule schedule;
  private final MissedSchedules policy;
  private final Clock clock;

  /** Stored in this instance's claims: the configured owner plus a nonce per instance. */
  private final String identity;

  private final Duration lease;
  private final Duration claimWindow;
  private final Duration clockTolerance;
  private final int maxAttempts;
  private final int countCap;
  private final Duration shutdownTimeout;
  private final Consumer<RunOutcome> listener;
  private final boolean attemptCheck;
  private final boolean renewalAttemptCheck;
  private final boolean claimLock;
  private final FencedJob fencedJob;
  private final PlainJob plainJob;
  private final DSLContext dsl;
  private final RunTable table;
  private final ScheduleMetrics metrics;
  private final Instant startedAt;
  private final ScheduledExecutorService renewer;
  private final RetryPolicy passRetry;

  private final Object lifecycle = new Object();
  private ScheduledExecutorService ticker;
  private volatile Thread tickerThread;
  private volatile boolean closing;
  private int failedPasses;

  /**
   * The latest scheduled time this instance handled: claimed here or lost to another instance, or
   * due before the instance started with no run in the table. Guarded by this.
   */
  private Instant lastPlanned;

  /**
   * The latest time the database refused as ahead of its clock: reported once, claimed again when
   * it is due. Guarded by this.
   */
  private Instant refusedAhead;

  /**
   * After a pass whose claim was refused as ahead: how long until the database's clock reaches the
   * time, for the next wake. Guarded by this.
   */
  private Duration aheadRetry;

  /**
   * Claims, takeovers and finishes of this instance whose answer was lost, by scheduled time,
   * oldest first: the next pass or scan settles them before anything else. Guarded by this.
   */
  private final Map<Instant, Unknown> unknown = new TreeMap<>();

  /**
   * Outcomes of a pass or scan that threw after producing them, oldest first: reported by the next
   * pass or scan that returns, before its own. Guarded by this.
   */
  private final List<RunOutcome> unreported = new ArrayList<>();

  /** What a pass left unknown at one scheduled time. */
  private sealed interface Unknown {
    Instant scheduledAt();
  }

  /**
   * A claim ({@code missed} is what its pass would have reported with it) or a takeover that threw:
   * it may have committed, granting {@code attempt} to this instance.
   */
  private record UnknownGrant(
      Instant scheduledAt, long attempt, boolean claim, Optional<RunOutcome.Missed> missed)
      implements Unknown {}

  /** A finish of {@code run} whose answer was lost. */
  private record UnknownFinish(ScheduledRun run) implements Unknown {
    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }
  }

  /** Everything the engine needs; exactly one of the two jobs is non-null. */
  public record Settings(
      String job,
      CronSchedule schedule,
      MissedSchedules policy,
      Clock clock,
      String identity,
      Duration lease,
      Duration claimWindow,
      Duration clockTolerance,
      int maxAttempts,
      int countCap,
      Duration queryTimeout,
      Duration shutdownTimeout,
      String table,
      Consumer<RunOutcome> listener,
      boolean attemptCheck,
      boolean renewalAttemptCheck,
      boolean claimLock) {}

  public Engine(
      DataSource dataSource,
      Settings settings,
      FencedJob fencedJob,
      PlainJob plainJob,
      ScheduleMetrics metrics) {
    if ((fencedJob == null) == (plainJob == null)) {
      throw new IllegalArgumentException("Pass exactly one job, fenced or plain");
    }
    this.job = settings.job();
    this.schedule = settings.schedule();
    this.policy = settings.policy();
    this.clock = settings.clock();
    this.identity = settings.identity();
    this.lease = settings.lease();
    this.claimWindow = settings.claimWindow();
    this.clockTolerance = settings.clockTolerance();
    this.maxAttempts = settings.maxAttempts();
    this.countCap = settings.countCap();
    this.shutdownTimeout = settings.shutdownTimeout();
    this.listener = settings.listener();
    this.attemptCheck = settings.attemptCheck();
    this.renewalAttemptCheck = settings.renewalAttemptCheck();
    this.claimLock = settings.claimLock();
    this.fencedJob = fencedJob;
    this.plainJob = plainJob;
    this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
    this.table = new RunTable(settings.table(), settings.queryTimeout());
    this.metrics = metrics;
    this.startedAt = clock.instant();
    // Daemon: it only serves runs in progress, which the (non-daemon) loop thread waits for.
    this.renewer = executor("nolock-schedule-renew-" + job, true);
    Duration maxBackoff = lease.dividedBy(3);
    this.passRetry =
        RetryPolicy.custom()
            .baseDelay(Duration.ofMillis(Math.min(500, maxBackoff.toMillis())))
            .maxDelay(maxBackoff)
            .build();
  }

  /** Creates the runs table and its index unless they exist. */
  public void createTableIfMissing() {
    backend(
        "create the runs table",
        () -> {
          table.createIfMissing(dsl);
          return null;
        });
  }

  /** The DDL, as SQL text, one statement per element. */
  public List<String> ddl() {
    return table.ddl(dsl).stream().map(q -> q.getSQL()).toList();
  }

  /**
   * One pass; see the class comment. Returns the outcomes of earlier passes that threw first.
   *
   * @throws BackendUnavailableException when a statement failed; what the pass had done is reported
   *     by the next pass that returns
   */
  public synchronized List<RunOutcome> runDueNow() {
    if (closing) {
      throw new IllegalStateException(
          "The scheduler of job \"" + job + "\" is closed: create a new one to run passes.");
    }
    pass(unreported);
    return drainUnreported();
  }

  /** Takes the outcomes collected in {@link #unreported}, now that they are being reported. */
  private List<RunOutcome> drainUnreported() {
    List<RunOutcome> outcomes = List.copyOf(unreported);
    unreported.clear();
    return outcomes;
  }

  /** Steps 1 to 5 of the class comment; appends each outcome to {@code outcomes} as it happens. */
  private void pass(List<RunOutcome> outcomes) {
    settle(outcomes);
    takeOverExpired(outcomes);
    Instant now = clock.instant();
    Optional<Instant> dueTime = schedule.latestAtOrBefore(now);
    if (refusedAhead != null && lastPlanned != null && !refusedAhead.isAfter(lastPlanned)) {
      refusedAhead = null; // granted, or handled otherwise
    }
    if (refusedAhead != null && (dueTime.isEmpty() || refusedAhead.isBefore(dueTime.get()))) {
      // A time refused as ahead stays the target until it is handled: planned again from the
      // wall clock, a clock further ahead than the tolerance plus one period would be refused a
      // new time at every pass and never run one.
      dueTime = Optional.of(refusedAhead);
    }
    if (dueTime.isEmpty() || (lastPlanned != null && !dueTime.get().isAfter(lastPlanned))) {
      return;
    }
    Instant due = dueTime.get();
    // Planned again when a claim found a run committed after the floor was read: the floor rises
    // past that run each time, so this ends.
    Step step = Step.REPLAN;
    while (step == Step.REPLAN && !closing) {
      Optional<Instant> previous =
          backend("read the latest claimed run", () -> table.latestClaimedBefore(dsl, job, due));
      Instant floor = previous.orElse(startedAt);
      if (!due.isAfter(floor)) {
        lastPlanned = due;
        return; // no run in the table and due before this instance started
      }
      CatchUp.Plan plan = CatchUp.plan(schedule, policy, floor, due, countCap);
      step = Step.NEXT;
      for (CatchUp.Slot slot : plan.slots()) {
        if (closing) {
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
        step = claimAndRun(slot, missed, outcomes);
        if (step != Step.NEXT) {
          break;
        }
      }
    }
  }

  /** What a pass does after one claim. */
  private enum Step {
    /** Claim the plan's next slot. */
    NEXT,
    /** Stop: the time lies ahead of the database's clock, and the later slots do too. */
    STOP,
    /** Plan again from the table: a run committed since the floor was read lies in the slot. */
    REPLAN
  }

  /**
   * Claims one planned time and runs it, or learns from the same statement why not: the time's row
   * is there (another instance's claim, or this instance's own run), the job has a later run, or
   * the time lies outside the window around the database's clock. The time counts as handled
   * ({@link #lastPlanned}) only once that answer is read, and never when it lies ahead of the
   * database's clock (it is claimed again when that clock reaches it) or when the job has a run
   * committed since the plan read the floor, in the span the slot would cover (planned again).
   */
  private Step claimAndRun(
      CatchUp.Slot slot, Optional<RunOutcome.Missed> missed, List<RunOutcome> outcomes) {
    Instant time = slot.scheduledAt();
    RunTable.ClaimDecision decision;
    try {
      decision =
          dsl.transactionResult(
              configuration -> {
                DSLContext tx = configuration.dsl();
                if (claimLock) {
                  table.lockClaims(tx, job);
                }
                return table.claim(
                    tx,
                    job,
                    time,
                    identity,
                    lease,
                    claimWindow,
                    clockTolerance,
                    slot.coversFrom(),
                    slot.missedBefore());
              });
    } catch (DataAccessException e) {
      // It may have landed: the next pass resumes it (the table's floor now skips it) or, if it
      // did not, plans the time again, which stays unplanned here.
      unknown.put(time, new UnknownGrant(time, 1, true, missed));
      throw unavailable("claim " + time, e);
    }
    if (decision.granted().isPresent()) {
      lastPlanned = time;
      claimed(decision.granted().get(), missed, outcomes);
      return Step.NEXT;
    }
    if (decision.ahead()) {
      // Not handled: the time is claimed again once the database's clock reaches it, and its
      // missed times are reported with that claim.
      aheadRetry = Duration.between(decision.databaseTime(), time.minus(clockTolerance));
      if (!time.equals(refusedAhead)) {
        refusedAhead = time;
        refused(time, decision.databaseTime(), "further ahead than the clock tolerance", outcomes);
      }
      return Step.STOP;
    }
    if (decision.existing().isEmpty()
        && decision.later().isEmpty()
        && !decision.tooOld()
        && decision.overlapping().isPresent()) {
      LOG.info(
          "Job {}: {} was claimed after this pass planned {} covering it; planning again",
          job,
          decision.overlapping().get(),
          time);
      return Step.REPLAN;
    }
    lastPlanned = time;
    if (decision.existing().isPresent()) {
      // This instance's own run (one it took over or resumed) was reported when it ran.
      if (!decision.existing().get().owner().equals(identity)) {
        metrics.skipped();
        outcomes.add(new RunOutcome.LostClaim(time));
      }
    } else if (decision.later().isPresent()) {
      // The later run's claim counted this slot's missed times; they are not reported again.
      metrics.superseded();
      LOG.warn(
          "Job {}: the database refused the claim of {}: the job already has a run of {}, so the"
              + " time was handled (run, counted missed, or its row deleted by retention): this"
              + " instance's wall clock ({}) is behind the database's ({}), or another instance's"
              + " catch-up covered it. Nothing ran",
          job,
          time,
          decision.later().get(),
          clock.instant(),
          decision.databaseTime());
      outcomes.add(new RunOutcome.Superseded(time, decision.later().get()));
    } else if (decision.tooOld()) {
      missed.ifPresent(
          m -> {
            metrics.missed(m.count());
            outcomes.add(m);
          });
      refused(time, decision.databaseTime(), "further back than the claim window", outcomes);
    } else {
      // The insert met a row committed while the statement ran: another instance's claim (this
      // instance's own rows are all committed before it claims).
      metrics.skipped();
      outcomes.add(new RunOutcome.LostClaim(time));
    }
    return Step.NEXT;
  }

  private void refused(Instant time, Instant databaseTime, String why, List<RunOutcome> outcomes) {
    metrics.outsideWindow();
    LOG.warn(
        "Job {}: the database refused the claim of {}: it lies {} (back {}, ahead {}) from the"
            + " database's clock, {}, which this instance's wall clock reads as {}. Nothing ran;"
            + " fix this instance's clock (NTP)",
        job,
        time,
        why,
        claimWindow,
        clockTolerance,
        databaseTime,
        clock.instant());
    outcomes.add(new RunOutcome.OutsideClaimWindow(time, databaseTime));
  }

  /** Reports and runs a claim this instance won (directly, or found landed after a lost answer). */
  private void claimed(
      RunTable.Claim claim, Optional<RunOutcome.Missed> missed, List<RunOutcome> outcomes) {
    metrics.claimed(Duration.between(claim.scheduledAt(), clock.instant()));
    missed.ifPresent(
        m -> {
          metrics.missed(m.count());
          outcomes.add(m);
        });
    outcomes.add(run(claim));
  }

  /**
   * Settles what earlier passes left unknown, oldest first; an entry is dropped once PostgreSQL
   * answered about it (its outcome, if any, is then in {@code outcomes}, which are reported even if
   * this pass fails later). Runs a claim or takeover that landed, and a fenced finish that did not
   * commit; reports a finish's true outcome.
   */
  private void settle(List<RunOutcome> outcomes) {
    for (Unknown entry : List.copyOf(unknown.values())) {
      if (closing) {
        return;
      }
      if (entry instanceof UnknownGrant grant) {
        settleGrant(grant, outcomes);
      } else if (entry instanceof UnknownFinish finish) {
        settleFinish(finish.run(), outcomes);
      }
    }
  }

  private void settleGrant(UnknownGrant grant, List<RunOutcome> outcomes) {
    Instant time = grant.scheduledAt();
    String what = grant.claim() ? "claim" : "takeover";
    // A claim's transaction holds the job's claim lock until it ends: taking it first waits for a
    // COMMIT still on its way to the server, so a claim that is landing is seen as landed, not
    // planned and claimed again (which would find its own row and never run it).
    Optional<RunTable.Claim> landed =
        backend(
            "settle the " + what + " of " + time,
            () ->
                dsl.transactionResult(
                    configuration -> {
                      DSLContext tx = configuration.dsl();
                      if (grant.claim() && claimLock) {
                        table.lockClaims(tx, job);
                      }
                      return table.resumeAttempt(tx, job, time, grant.attempt(), identity, lease);
                    }));
    unknown.remove(time);
    if (landed.isEmpty()) {
      return; // it never landed (the plan or the takeovers below try again), or is not ours now
    }
    LOG.info(
        "Job {}: the {} of {} had landed while its answer was lost; running attempt {}",
        job,
        what,
        time,
        landed.get().attempt());
    if (grant.claim()) {
      if (lastPlanned == null || time.isAfter(lastPlanned)) {
        lastPlanned = time;
      }
      claimed(landed.get(), grant.missed(), outcomes);
    } else {
      metrics.takenOver();
      outcomes.add(run(landed.get()));
    }
  }

  /**
   * The true outcome of a finish whose answer was lost. A fenced finish cannot be sent again (the
   * job's writes were in its transaction): its attempt is resumed if it is still current, which
   * means the transaction did not commit (a transaction still open on the server holds the run's
   * row lock, so the {@code UPDATE} waits for it to commit or roll back), and the job runs again
   * with the same attempt; otherwise the run is read. A plain finish is sent again.
   */
  private void settleFinish(ScheduledRun run, List<RunOutcome> outcomes) {
    Instant time = run.scheduledAt();
    long attempt = run.attempt().value();
    if (fencedJob != null) {
      Optional<RunTable.Claim> again =
          backend(
              "settle the finish of " + time,
              () ->
                  OwnTransaction.run(
                      dsl, d -> table.resumeAttempt(d, job, time, attempt, identity, lease)));
      if (again.isPresent()) {
        unknown.remove(time);
        LOG.warn(
            "Job {}: the finish of {} attempt {} had not committed (its answer was lost) and its"
                + " writes rolled back; running the attempt again",
            job,
            time,
            attempt);
        outcomes.add(run(again.get()));
        return;
      }
    } else {
      int finished =
          backend(
              "finish " + time + " again",
              () ->
                  OwnTransaction.run(dsl, d -> table.finish(d, job, time, attempt, attemptCheck)));
      if (finished == 1) {
        unknown.remove(time);
        metrics.finished();
        outcomes.add(new RunOutcome.Finished(run));
        return;
      }
    }
    Optional<RunTable.Current> current =
        backend("read the run of " + time, () -> table.current(dsl, job, time));
    unknown.remove(time);
    if (current.isPresent() && current.get().finishedBy(attempt)) {
      metrics.finished();
      outcomes.add(new RunOutcome.Finished(run));
    } else {
      outcomes.add(stale(run));
    }
  }

  private void takeOverExpired(List<RunOutcome> outcomes) {
    List<RunTable.Expired> expired =
        backend("find expired runs", () -> table.expired(dsl, job, TAKEOVER_BATCH));
    for (RunTable.Expired run : expired) {
      if (closing) {
        return;
      }
      Optional<RunTable.Claim> claim;
      try {
        claim =
            OwnTransaction.run(
                dsl, d -> table.takeOver(d, job, run.scheduledAt(), identity, lease, maxAttempts));
      } catch (DataAccessException e) {
        // It may have landed: the next pass resumes it rather than wait out the lease it set.
        unknown.put(
            run.scheduledAt(),
            new UnknownGrant(run.scheduledAt(), run.attempt() + 1, false, Optional.empty()));
        throw unavailable("take over " + run.scheduledAt(), e);
      }
      if (claim.isPresent()) {
        metrics.takenOver();
        LOG.info(
            "Job {}: took over the run of {} with attempt {} (the lease of attempt {} expired)",
            job,
            run.scheduledAt(),
            claim.get().attempt(),
            run.attempt());
        outcomes.add(run(claim.get()));
        continue;
      }
      Optional<Long> gaveUp =
          backend(
              "give up " + run.scheduledAt(),
              () ->
                  OwnTransaction.run(
                      dsl, d -> table.giveUp(d, job, run.scheduledAt(), maxAttempts)));
      if (gaveUp.isPresent()) {
        metrics.gaveUp();
        outcomes.add(new RunOutcome.GaveUp(run.scheduledAt(), gaveUp.get()));
      }
    }
  }

  /** Runs a claimed attempt with its lease renewed, and finishes it. */
  private RunOutcome run(RunTable.Claim claim) {
    ScheduledRun run =
        new ScheduledRun(
            job,
            claim.scheduledAt(),
            FencingToken.of(claim.attempt()),
            identity,
            claim.coversFrom(),
            claim.missed());
    AtomicBoolean over = new AtomicBoolean();
    AtomicReference<ScheduledFuture<?>> renewal = new AtomicReference<>();
    long period = Math.max(1, lease.toMillis() / 3);
    synchronized (renewal) {
      renewal.set(
          renewer.scheduleAtFixedRate(
              () -> renew(run, over, renewal), period, period, TimeUnit.MILLISECONDS));
    }
    Runnable stopRenewal =
        () -> {
          over.set(true);
          synchronized (renewal) {
            renewal.get().cancel(false);
          }
        };
    long started = System.nanoTime();
    try {
      return fencedJob != null ? runFenced(run, stopRenewal) : runPlain(run, stopRenewal);
    } finally {
      stopRenewal.run();
      metrics.ran(Duration.ofNanos(System.nanoTime() - started));
    }
  }

  /**
   * {@code stopRenewal} runs before the finish, release or failure is sent: from then on that
   * statement decides, and a renewal still queued is not sent (one already on its way is refused by
   * the released marker, see {@link RunTable#renew}).
   */
  private RunOutcome runFenced(ScheduledRun run, Runnable stopRenewal) {
    try {
      dsl.transaction(
          configuration -> {
            DSLContext tx = configuration.dsl();
            try {
              fencedJob.run(run, tx);
            } catch (Exception e) {
              throw new JobThrew(e);
            }
            stopRenewal.run(); // the finish decides now; a renewal from here on proves nothing
            int finished =
                table.finish(tx, job, run.scheduledAt(), run.attempt().value(), attemptCheck);
            if (finished == 0) {
              throw new StaleAttempt();
            }
          });
    } catch (StaleAttempt e) {
      return stale(run);
    } catch (JobThrew e) {
      return failed(run, e.getCause(), stopRenewal);
    } catch (DataAccessException e) {
      throw unknownFinish(run, e);
    }
    metrics.finished();
    return new RunOutcome.Finished(run);
  }

  private RunOutcome runPlain(ScheduledRun run, Runnable stopRenewal) {
    try {
      plainJob.run(run);
    } catch (Exception e) {
      return failed(run, e, stopRenewal);
    }
    stopRenewal.run();
    int finished;
    try {
      finished =
          OwnTransaction.run(
              dsl,
              d -> table.finish(d, job, run.scheduledAt(), run.attempt().value(), attemptCheck));
    } catch (DataAccessException e) {
      throw unknownFinish(run, e);
    }
    if (finished == 0) {
      return stale(run);
    }
    metrics.finished();
    return new RunOutcome.Finished(run);
  }

  private RunOutcome stale(ScheduledRun run) {
    metrics.staleFinish();
    LOG.warn(
        "Job {}: the finish of {} attempt {} was refused: another instance took the run over"
            + " while this one was paused or slow{}",
        job,
        run.scheduledAt(),
        run.attempt().value(),
        fencedJob != null ? "; its writes were rolled back" : "");
    return new RunOutcome.StaleFinish(run);
  }

  private RunOutcome failed(ScheduledRun run, Throwable thrown, Runnable stopRenewal) {
    stopRenewal.run();
    Exception error = thrown instanceof Exception e ? e : new RuntimeException(thrown);
    boolean interrupted = error instanceof InterruptedException;
    metrics.failed();
    boolean retry = run.attempt().value() < maxAttempts;
    String message = error.getClass().getName() + ": " + error.getMessage();
    boolean recorded = false;
    try {
      recorded =
          OwnTransaction.run(
              dsl,
              d ->
                  retry
                      ? table.release(d, job, run.scheduledAt(), run.attempt().value(), message)
                      : table.fail(d, job, run.scheduledAt(), run.attempt().value(), message));
    } catch (DataAccessException e) {
      error.addSuppressed(e);
      recorded = retry; // the lease runs out and a takeover retries it anyway
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    LOG.warn(
        "Job {}: attempt {} of {} threw; {}",
        job,
        run.attempt().value(),
        run.scheduledAt(),
        retry && recorded ? "it will be retried" : "the run is recorded as failed",
        error);
    return new RunOutcome.Failed(run, error, retry && recorded);
  }

  private void renew(
      ScheduledRun run, AtomicBoolean over, AtomicReference<ScheduledFuture<?>> renewal) {
    if (over.get()) {
      return;
    }
    try {
      boolean renewed =
          OwnTransaction.run(
              dsl,
              d ->
                  table.renew(
                      d,
                      job,
                      run.scheduledAt(),
                      run.attempt().value(),
                      lease,
                      renewalAttemptCheck));
      if (over.get()) {
        return;
      }
      if (renewed) {
        metrics.renewed();
        return;
      }
      metrics.leaseLost();
      LOG.warn(
          "Job {}: the lease of {} attempt {} was lost: another instance took the run over (or it"
              + " was given up); its finish will be refused",
          job,
          run.scheduledAt(),
          run.attempt().value());
      synchronized (renewal) {
        renewal.get().cancel(false);
      }
    } catch (RuntimeException e) {
      metrics.renewalFailed();
      LOG.warn("Job {}: could not renew the lease of {}", job, run.scheduledAt(), e);
    }
  }

  /** Starts the background loop. */
  public void start() {
    synchronized (lifecycle) {
      if (closing) {
        throw new IllegalStateException("The scheduler of job \"" + job + "\" is closed.");
      }
      if (ticker != null) {
        throw new IllegalStateException("The scheduler of job \"" + job + "\" is already started.");
      }
      ticker = executor("nolock-schedule-" + job, false);
      ticker.execute(() -> tickerThread = Thread.currentThread());
      scheduleWake(Duration.ZERO);
      long scan = lease.toMillis();
      ticker.scheduleWithFixedDelay(this::scan, scan, scan, TimeUnit.MILLISECONDS);
    }
  }

  private void wake() {
    if (closing) {
      return;
    }
    Duration next = null;
    try {
      deliver(runDueNow());
      failedPasses = 0;
    } catch (RuntimeException e) {
      failedPasses++;
      next = passRetry.backoff(failedPasses, ThreadLocalRandom.current());
      LOG.warn("Job {}: a pass failed; retrying in {}", job, next, e);
    } finally {
      if (!closing) {
        scheduleWake(next);
      }
    }
  }

  private void scan() {
    if (closing) {
      return;
    }
    try {
      List<RunOutcome> outcomes;
      synchronized (this) {
        if (closing) {
          return;
        }
        settle(unreported);
        takeOverExpired(unreported);
        outcomes = drainUnreported();
      }
      deliver(outcomes);
    } catch (RuntimeException e) {
      LOG.warn("Job {}: the scan for expired runs failed", job, e);
    }
  }

  /** Schedules the next pass: after {@code retry} when given, else at the next scheduled time. */
  private void scheduleWake(Duration retry) {
    Instant now = clock.instant();
    Duration delay;
    if (retry != null) {
      delay = retry;
    } else {
      Instant from;
      Duration untilDue;
      synchronized (this) {
        from = lastPlanned != null && lastPlanned.isAfter(now) ? lastPlanned : now;
        untilDue = aheadRetry;
        aheadRetry = null;
      }
      Optional<Instant> next = schedule.nextAfter(from);
      if (next.isEmpty()) {
        LOG.info("Job {}: the schedule {} has no further times", job, schedule);
        return;
      }
      // One millisecond late rather than early; an early wake finds nothing due and schedules
      // itself again. The delay runs on the monotonic clock, so a long one is cut to re-read the
      // wall clock at least every MAX_SLEEP (NTP steps, a suspended machine).
      delay = Duration.between(now, next.get()).plusMillis(1);
      if (untilDue != null && untilDue.plusMillis(1).compareTo(delay) < 0) {
        delay = untilDue.plusMillis(1); // a time refused as ahead is due by the database then
      }
      if (delay.compareTo(MAX_SLEEP) > 0) {
        delay = MAX_SLEEP;
      }
    }
    long millis = Math.max(0, delay.toMillis());
    try {
      ticker.schedule(this::wake, millis, TimeUnit.MILLISECONDS);
    } catch (java.util.concurrent.RejectedExecutionException e) {
      // closed meanwhile
    }
  }

  private void deliver(List<RunOutcome> outcomes) {
    for (RunOutcome outcome : outcomes) {
      try {
        listener.accept(outcome);
      } catch (RuntimeException e) {
        LOG.warn("Job {}: the outcome listener threw on {}", job, outcome, e);
      }
    }
  }

  /**
   * Stops the loop: no new pass starts, a running job is waited for up to the shutdown timeout (its
   * lease is renewed meanwhile), then interrupted. Idempotent.
   */
  @Override
  public void close() {
    ScheduledExecutorService loop;
    synchronized (lifecycle) {
      if (closing) {
        return;
      }
      closing = true;
      loop = ticker;
    }
    try {
      if (loop != null) {
        loop.shutdown();
        if (Thread.currentThread() != tickerThread
            && !loop.awaitTermination(shutdownTimeout.toMillis(), TimeUnit.MILLISECONDS)) {
          LOG.warn(
              "Job {}: the running job did not end within {}; interrupting it",
              job,
              shutdownTimeout);
          loop.shutdownNow();
          loop.awaitTermination(10, TimeUnit.SECONDS);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (loop != null) {
        loop.shutdownNow();
      }
    } finally {
      renewer.shutdownNow();
    }
  }

  private <T> T backend(String step, Supplier<T> call) {
    try {
      return call.get();
    } catch (DataAccessException e) {
      throw unavailable(step, e);
    }
  }

  /** Remembers {@code run}'s finish as unknown, for the next pass to find out, and says so. */
  private BackendUnavailableException unknownFinish(ScheduledRun run, DataAccessException e) {
    unknown.put(run.scheduledAt(), new UnknownFinish(run));
    return unavailable(
        "finish "
            + run.scheduledAt()
            + " (whether it committed is unknown; the next pass finds out)",
        e);
  }

  private BackendUnavailableException unavailable(String step, DataAccessException e) {
    return new BackendUnavailableException(
        "Scheduled job \""
            + job
            + "\": could not "
            + step
            + " in PostgreSQL: "
            + e.getMessage()
            + ". Retry later; the run's lease decides what happens to a run in flight.",
        e);
  }

  private static ScheduledExecutorService executor(String threadName, boolean daemon) {
    ScheduledThreadPoolExecutor executor =
        new ScheduledThreadPoolExecutor(
            1,
            r -> {
              Thread thread = new Thread(r, threadName);
              thread.setDaemon(daemon);
              return thread;
            });
    executor.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    executor.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
    executor.setRemoveOnCancelPolicy(true);
    return executor;
  }

  /** Carries the job's exception out of the transaction, which rolls back. */
  private static final class JobThrew extends RuntimeException {
    private static final long serialVersionUID = 1L;

    JobThrew(Exception cause) {
      super(cause);
    }
  }

  /** Makes the transaction roll back when the finish matched no row. */
  private static final class StaleAttempt extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StaleAttempt() {
      super("stale attempt", null, false, false);
    }
  }
}
