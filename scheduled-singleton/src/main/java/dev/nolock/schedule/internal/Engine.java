package dev.nolock.schedule.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.OwnTransaction;
import dev.nolock.patterns.RetryPolicy;
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
 *   <li><b>Unknown outcomes.</b> A takeover or a finish of this instance whose answer was lost (the
 *       pass threw {@link BackendUnavailableException}) is settled first: a takeover that landed is
 *       resumed and run ({@link RunTable#resumeOwn}); a fenced finish is found committed ({@code
 *       Finished}), or, not committed, given back so that the takeovers below run it again at once
 *       with the next attempt; a plain finish is sent again (never the job); a finish of an attempt
 *       taken over meanwhile is {@code StaleFinish}.
 *   <li><b>Takeovers.</b> Running runs of the job whose lease expired on the database's clock are
 *       claimed again with the next attempt ({@link RunTable#takeOver}) and run; those out of
 *       attempts are recorded as failed.
 *   <li><b>The due time.</b> {@code due} is the latest scheduled time at or before the wall clock's
 *       now. Nothing happens when this instance already handled it: claimed it, or lost its claim
 *       to another instance. A claim that failed (the database unreachable for a moment) handles
 *       nothing, so the next pass, which the loop retries with backoff, plans the time again.
 *   <li><b>The plan.</b> The floor is the latest run of the job claimed before {@code due} in the
 *       table (the instance's start when there is none); {@link CatchUp} turns floor, due and the
 *       missed-schedules policy into the times to claim.
 *   <li><b>Claim and run</b>, oldest first, one at a time: {@code INSERT ... ON CONFLICT DO
 *       NOTHING}; on a conflict, a running attempt of this instance's own (its claim landed while
 *       the answer was lost) is resumed with its lease extended ({@link RunTable#resumeOwn}; "own"
 *       is the identity, which carries a nonce per instance, so an instance that shares its
 *       configured owner never matches); any other conflict is a lost claim, counted and skipped; a
 *       won one runs the job while a second thread renews the lease every third of it, then
 *       finishes the run conditionally on the attempt.
 * </ol>
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
  private final int maxAttempts;
  private final int countCap;
  private final Duration shutdownTimeout;
  private final Consumer<RunOutcome> listener;
  private final boolean attemptCheck;
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
   * Takeovers and finishes of this instance whose answer was lost, by scheduled time, oldest first:
   * the next pass or scan settles them before anything else. Guarded by this.
   */
  private final Map<Instant, Unknown> unknown = new TreeMap<>();

  /** A takeover of {@code scheduledAt} ({@code run} null) or a finish of {@code run}: unknown. */
  private record Unknown(Instant scheduledAt, ScheduledRun run) {}

  /** Everything the engine needs; exactly one of the two jobs is non-null. */
  public record Settings(
      String job,
      CronSchedule schedule,
      MissedSchedules policy,
      Clock clock,
      String identity,
      Duration lease,
      int maxAttempts,
      int countCap,
      Duration queryTimeout,
      Duration shutdownTimeout,
      String table,
      Consumer<RunOutcome> listener,
      boolean attemptCheck) {}

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
    this.maxAttempts = settings.maxAttempts();
    this.countCap = settings.countCap();
    this.shutdownTimeout = settings.shutdownTimeout();
    this.listener = settings.listener();
    this.attemptCheck = settings.attemptCheck();
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

  /** One pass; see the class comment. */
  public synchronized List<RunOutcome> runDueNow() {
    if (closing) {
      throw new IllegalStateException(
          "The scheduler of job \"" + job + "\" is closed: create a new one to run passes.");
    }
    List<RunOutcome> outcomes = new ArrayList<>();
    settle(outcomes);
    takeOverExpired(outcomes);
    Instant now = clock.instant();
    Optional<Instant> dueTime = schedule.latestAtOrBefore(now);
    if (dueTime.isEmpty() || (lastPlanned != null && !dueTime.get().isAfter(lastPlanned))) {
      return outcomes;
    }
    Instant due = dueTime.get();
    Optional<Instant> previous =
        backend("read the latest claimed run", () -> table.latestClaimedBefore(dsl, job, due));
    Instant floor = previous.orElse(startedAt);
    if (!due.isAfter(floor)) {
      lastPlanned = due;
      return outcomes; // no run in the table and due before this instance started
    }
    CatchUp.Plan plan = CatchUp.plan(schedule, policy, floor, due, countCap);
    for (CatchUp.Slot slot : plan.slots()) {
      if (closing) {
        break;
      }
      Optional<RunTable.Claim> claim =
          backend(
              "claim " + slot.scheduledAt(),
              () ->
                  OwnTransaction.run(
                      dsl,
                      d ->
                          table
                              .claim(
                                  d,
                                  job,
                                  slot.scheduledAt(),
                                  identity,
                                  lease,
                                  slot.coversFrom(),
                                  slot.missedBefore())
                              .or(
                                  () ->
                                      table.resumeOwn(
                                          d, job, slot.scheduledAt(), identity, lease))));
      // Only now is the time handled: claimed here or lost to another instance. A claim that threw
      // above leaves it (and due) unplanned, so the next pass plans again from the table.
      lastPlanned = slot.scheduledAt();
      if (claim.isEmpty()) {
        metrics.skipped();
        outcomes.add(new RunOutcome.LostClaim(slot.scheduledAt()));
        continue;
      }
      metrics.claimed(Duration.between(slot.scheduledAt(), clock.instant()));
      if (slot.missedBefore() > 0) {
        metrics.missed(slot.missedBefore());
        outcomes.add(
            new RunOutcome.Missed(
                slot.scheduledAt(),
                plan.firstMissed().orElse(slot.scheduledAt()),
                slot.missedBefore()));
      }
      outcomes.add(run(claim.get()));
    }
    return outcomes;
  }

  /**
   * Settles what earlier passes left unknown, oldest first; an entry is dropped once PostgreSQL
   * answered about it. Runs a takeover that landed, and reports a finish's true outcome.
   */
  private void settle(List<RunOutcome> outcomes) {
    for (Unknown entry : List.copyOf(unknown.values())) {
      if (closing) {
        return;
      }
      Instant time = entry.scheduledAt();
      if (entry.run() == null) {
        Optional<RunTable.Claim> claim =
            backend(
                "settle the takeover of " + time,
                () -> OwnTransaction.run(dsl, d -> table.resumeOwn(d, job, time, identity, lease)));
        unknown.remove(time);
        if (claim.isPresent()) {
          metrics.takenOver();
          LOG.info(
              "Job {}: the takeover of {} had landed while its answer was lost; running attempt {}",
              job,
              time,
              claim.get().attempt());
          outcomes.add(run(claim.get()));
        }
      } else {
        Optional<RunOutcome> outcome = settleFinish(entry.run());
        unknown.remove(time);
        outcome.ifPresent(outcomes::add);
      }
    }
  }

  /**
   * The true outcome of a finish whose answer was lost. A fenced finish cannot be sent again (the
   * job's writes were in its transaction), so its attempt is given back if it is still current: a
   * transaction still open on the server holds the run's row lock, so the {@code UPDATE} waits for
   * it to commit or roll back, and then either finds the run done by this attempt or gives it back
   * for the takeovers that follow. A plain finish is sent again. Empty: given back, no outcome yet.
   */
  private Optional<RunOutcome> settleFinish(ScheduledRun run) {
    Instant time = run.scheduledAt();
    long attempt = run.attempt().value();
    if (fencedJob != null) {
      boolean givenBack =
          backend(
              "settle the finish of " + time,
              () ->
                  OwnTransaction.run(
                      dsl,
                      d ->
                          table.release(
                              d,
                              job,
                              time,
                              attempt,
                              "the finish's answer was lost and it had not committed;"
                                  + " given back for a takeover")));
      if (givenBack) {
        LOG.warn(
            "Job {}: the finish of {} attempt {} had not committed (its answer was lost); the run"
                + " is given back and taken over with the next attempt",
            job,
            time,
            attempt);
        return Optional.empty();
      }
    } else {
      int finished =
          backend(
              "finish " + time + " again",
              () ->
                  OwnTransaction.run(dsl, d -> table.finish(d, job, time, attempt, attemptCheck)));
      if (finished == 1) {
        metrics.finished();
        return Optional.of(new RunOutcome.Finished(run));
      }
    }
    Optional<RunTable.Current> current =
        backend("read the run of " + time, () -> table.current(dsl, job, time));
    if (current.isPresent() && current.get().finishedBy(attempt)) {
      metrics.finished();
      return Optional.of(new RunOutcome.Finished(run));
    }
    return Optional.of(stale(run));
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
        unknown.put(run.scheduledAt(), new Unknown(run.scheduledAt(), null));
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
    long started = System.nanoTime();
    try {
      return fencedJob != null ? runFenced(run, over) : runPlain(run, over);
    } finally {
      over.set(true);
      renewal.get().cancel(false);
      metrics.ran(Duration.ofNanos(System.nanoTime() - started));
    }
  }

  private RunOutcome runFenced(ScheduledRun run, AtomicBoolean over) {
    try {
      dsl.transaction(
          configuration -> {
            DSLContext tx = configuration.dsl();
            try {
              fencedJob.run(run, tx);
            } catch (Exception e) {
              throw new JobThrew(e);
            }
            over.set(true); // the finish decides now; a renewal from here on proves nothing
            int finished =
                table.finish(tx, job, run.scheduledAt(), run.attempt().value(), attemptCheck);
            if (finished == 0) {
              throw new StaleAttempt();
            }
          });
    } catch (StaleAttempt e) {
      return stale(run);
    } catch (JobThrew e) {
      return failed(run, e.getCause());
    } catch (DataAccessException e) {
      unknown.put(run.scheduledAt(), new Unknown(run.scheduledAt(), run));
      throw unavailable(
          "finish "
              + run.scheduledAt()
              + " (whether it committed is unknown; the next pass finds out)",
          e);
    }
    metrics.finished();
    return new RunOutcome.Finished(run);
  }

  private RunOutcome runPlain(ScheduledRun run, AtomicBoolean over) {
    try {
      plainJob.run(run);
    } catch (Exception e) {
      return failed(run, e);
    }
    over.set(true);
    int finished;
    try {
      finished =
          OwnTransaction.run(
              dsl,
              d -> table.finish(d, job, run.scheduledAt(), run.attempt().value(), attemptCheck));
    } catch (DataAccessException e) {
      unknown.put(run.scheduledAt(), new Unknown(run.scheduledAt(), run));
      throw unavailable(
          "finish "
              + run.scheduledAt()
              + " (whether it committed is unknown; the next pass finds out)",
          e);
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

  private RunOutcome failed(ScheduledRun run, Throwable thrown) {
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
              dsl, d -> table.renew(d, job, run.scheduledAt(), run.attempt().value(), lease));
      if (over.get()) {
        return;
      }
      if (renewed) {
        metrics.renewed();
        return;
      }
      metrics.leaseLost();
      LOG.warn(
          "Job {}: the lease of {} attempt {} was lost (expired or taken over); its finish will"
              + " be refused if another instance has taken the run over",
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
      List<RunOutcome> outcomes = new ArrayList<>();
      synchronized (this) {
        if (!closing) {
          settle(outcomes);
          takeOverExpired(outcomes);
        }
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
      synchronized (this) {
        from = lastPlanned != null && lastPlanned.isAfter(now) ? lastPlanned : now;
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
