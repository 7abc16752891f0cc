package dev.nolock.schedule;

import dev.nolock.schedule.internal.Engine;
import dev.nolock.schedule.internal.InstanceIdentity;
import dev.nolock.schedule.internal.ScheduleMetrics;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;

/**
 * A cron job that every instance of a fleet runs, where each scheduled time executes at most once
 * in effect, claimed without a leader.
 *
 * <h2>What it guarantees</h2>
 *
 * <ul>
 *   <li>A run is identified by {@code (job, scheduled time)} and claimed with {@code INSERT ... ON
 *       CONFLICT DO NOTHING}: one instance wins each time, the others count a lost claim. The
 *       claims of a job are serialised by a transaction-scoped advisory lock, held for one claim's
 *       transaction and never while a job runs, so each claim sees the claims committed before it.
 *   <li>The claim carries a lease ({@code locked_until}, on PostgreSQL's {@code clock_timestamp()})
 *       renewed while the job runs, and an attempt token. A run whose instance died or froze is
 *       taken over after its lease expired, with the next attempt: a crashed run is retried, not
 *       silently lost (up to {@link ScheduleConfig#maxAttempts()}).
 *   <li>A {@link FencedJob}'s writes commit in one transaction with {@code UPDATE ... SET state =
 *       'done' WHERE ... AND attempt = :attempt AND state = 'running'}; when that matches no row
 *       the whole transaction rolls back. So at most one attempt's writes ever commit for a
 *       scheduled time, however long an instance was paused. A {@link PlainJob} gets the attempt
 *       token to fence the system it writes to.
 *   <li>Missed times (the fleet was down, every instance busy) are computed from the last claimed
 *       run in the table and handled by the {@link MissedSchedules} policy.
 * </ul>
 *
 * <h2>Two clocks</h2>
 *
 * The schedule is wall-clock time by nature (cron), computed on {@link ScheduleConfig#clock()};
 * whether a run is still held is decided by the database's {@code clock_timestamp()} alone. See
 * {@link ScheduleConfig}.
 *
 * <h2>Use</h2>
 *
 * Create it with {@link #fenced} or {@link #plain}, call {@link #createTableIfMissing()} once, then
 * either {@link #start()} the background loop (which wakes at each scheduled time) and {@link
 * #close()} it on shutdown, or drive passes yourself with {@link #runDueNow()}. Bound the runs
 * table with {@link #purgeFinishedRunsOlderThan(Duration)} from time to time. Thread-safe.
 */
public final class ScheduledSingleton implements AutoCloseable {

  private final ScheduleConfig config;
  private final String identity;
  private final Engine engine;

  private ScheduledSingleton(
      DataSource dataSource, ScheduleConfig config, FencedJob fenced, PlainJob plain) {
    if (dataSource == null) {
      throw new IllegalArgumentException(
          "dataSource is null: pass a pool on the database that holds the runs table");
    }
    if (config == null) {
      throw new IllegalArgumentException(
          "config is null: pass ScheduleConfig.custom(job, schedule).build()");
    }
    this.config = config;
    this.identity = InstanceIdentity.of(config.owner());
    this.engine =
        new Engine(
            dataSource,
            config,
            identity,
            new Engine.Checks(
                config.attemptCheck(),
                config.renewalAttemptCheck(),
                config.claimLock(),
                config.retentionGuards()),
            fenced,
            plain,
            new ScheduleMetrics(
                config.registry().getOrNull(),
                config.metricsInstanceName().getOrNull(),
                config.job()));
  }

  /**
   * A job whose writes go to the scheduler's database through the transaction that finishes the
   * run: at most one attempt's writes commit per scheduled time.
   *
   * @param dataSource a pool on the database that holds the runs table (autocommit on or off)
   */
  public static ScheduledSingleton fenced(
      DataSource dataSource, ScheduleConfig config, FencedJob job) {
    return new ScheduledSingleton(dataSource, config, requireJob(job), null);
  }

  /**
   * A job with effects elsewhere: it gets the attempt token to pass on, and the run is finished
   * after it returns.
   */
  public static ScheduledSingleton plain(
      DataSource dataSource, ScheduleConfig config, PlainJob job) {
    return new ScheduledSingleton(dataSource, config, null, requireJob(job));
  }

  private static <T> T requireJob(T job) {
    if (job == null) {
      throw new IllegalArgumentException(
          "job is null: pass the work to run at each scheduled time, e.g. run -> report(run)");
    }
    return job;
  }

  public ScheduleConfig config() {
    return config;
  }

  /**
   * The identity this instance stores in the runs it claims and hands to its jobs ({@link
   * ScheduledRun#owner()}): the configured {@link ScheduleConfig#owner() owner}, {@code '#'}, and a
   * random 16-digit nonce made when this instance was created. Unique per instance even when
   * instances share a configuration, so a claim whose answer was lost is resumed only by the
   * instance that sent it.
   */
  public String identity() {
    return identity;
  }

  /**
   * Creates what is missing of the runs table and its partial index (the schema of a qualified name
   * must exist), leaves what exists, and refuses a table it cannot use. Harmless to call again.
   *
   * <ol>
   *   <li>{@code CREATE TABLE IF NOT EXISTS} the table ({@link #ddl()});
   *   <li>read the shape of the table the name resolves to: each column the scheduler reads or
   *       writes must exist with a type it can bind (a text column may be {@code text} or a wide
   *       enough {@code varchar}), a column it sets to {@code NULL} must be nullable, any other
   *       column must be nullable or have a default, and a unique key on exactly {@code (job,
   *       scheduled_at)} must exist (the claim's {@code ON CONFLICT} needs it);
   *   <li>{@code CREATE INDEX IF NOT EXISTS} the takeover index.
   * </ol>
   *
   * @throws dev.nolock.patterns.SchemaMismatchException when the table exists with a shape the
   *     scheduler cannot use; its message holds the DDL that fits, and nothing was changed
   * @throws dev.nolock.patterns.BackendUnavailableException when PostgreSQL is unreachable or timed
   *     out; retry later
   * @throws IllegalStateException when PostgreSQL refused the statement in a way a retry would
   *     repeat (a missing privilege, an unsupported database); the message says what to fix
   */
  public void createTableIfMissing() {
    engine.createTableIfMissing();
  }

  /** The DDL {@link #createTableIfMissing()} runs, one statement per element. */
  public List<String> ddl() {
    return engine.ddl();
  }

  /**
   * Runs one pass now, on the calling thread: takes over expired runs, then claims and runs what is
   * due at the clock's current time (with missed times per the policy). Returns what happened to
   * each scheduled time it touched, after what earlier passes that threw had already done (each
   * outcome is returned once); empty when nothing was due that this instance had not handled.
   * Passes of one instance run one at a time.
   *
   * @throws dev.nolock.patterns.BackendUnavailableException when PostgreSQL failed; retry later.
   *     The outcomes the pass had produced before it failed are returned by the next pass that
   *     returns. When it failed on a claim, a takeover or a finish whose outcome is therefore
   *     unknown, the next pass settles that first: it runs a claim or takeover that landed (with
   *     the attempt it was granted, before any later time), and reports the finish's true outcome
   *     ({@link RunOutcome.Finished}, {@link RunOutcome.StaleAttempt}; {@link
   *     RunOutcome.NoLongerKnown} when retention deleted the finished run before it asked) or, for
   *     a fenced job whose commit did not land, runs the time again with the same attempt
   * @throws IllegalStateException after {@link #close()}; or when PostgreSQL refused a statement in
   *     a way a retry would repeat (the table does not match, a missing privilege), which is
   *     settled like a failure above once fixed
   */
  public List<RunOutcome> runDueNow() {
    return engine.runDueNow();
  }

  /**
   * Deletes this job's finished runs that no claim needs any more, and returns how many it deleted.
   * The runs table grows by one row per scheduled time; this is its retention. Other jobs' rows in
   * the same table are untouched (each job's instances purge their own).
   *
   * <p>What it guarantees: no scheduled time runs twice because of it, and no run in flight loses
   * its row. It never deletes
   *
   * <ul>
   *   <li>the job's newest run, whatever its age: it refuses every claim of an older time (so an
   *       instance whose clock is behind cannot run a handled time again) and is the floor from
   *       which the next pass counts missed times;
   *   <li>a run scheduled inside the job's catch-up window, {@link ScheduleConfig#claimWindow()}
   *       back from the database's clock: its time could still be claimed, and its row answers that
   *       claim;
   *   <li>a run that finished less than {@code age} ago, nor less than the claim window ago: an
   *       instance whose finish answer was lost reads it to report the true outcome (one that asks
   *       only after the row was deleted reports {@link RunOutcome.NoLongerKnown}, never a stale
   *       attempt);
   *   <li>a {@code running} run: in flight, given back after its job threw, or waiting for a
   *       takeover.
   * </ul>
   *
   * <p>The algorithm:
   *
   * <ol>
   *   <li>{@code keep} = the larger of {@code age} and the claim window;
   *   <li>in a transaction of its own, delete up to 1,000 of the job's rows, oldest first, that are
   *       {@code done} or {@code failed}, finished before {@code clock_timestamp() - keep},
   *       scheduled before {@code clock_timestamp() - claimWindow}, and scheduled before the job's
   *       newest row;
   *   <li>repeat while a batch was full.
   * </ol>
   *
   * It takes no lock a claim takes, so it never delays a claim; a claim in flight refuses a handled
   * time whichever commits first (it sees the time's row, or the newest row after it). Safe to call
   * from any instance, at any time, concurrently with passes and other purges.
   *
   * @param age how long a finished run is kept at least, 0 to {@link
   *     ScheduleConfig#MAX_CLAIM_WINDOW}; the claim window applies when it is longer
   * @return the rows deleted
   * @throws IllegalArgumentException when {@code age} is null, negative or longer than {@link
   *     ScheduleConfig#MAX_CLAIM_WINDOW}
   * @throws dev.nolock.patterns.BackendUnavailableException when PostgreSQL failed; the batches
   *     deleted before stay deleted, and calling it again continues
   * @throws IllegalStateException when PostgreSQL refused the statement in a way a retry would
   *     repeat (the table does not match, a missing privilege); the batches before stay deleted
   */
  public long purgeFinishedRunsOlderThan(Duration age) {
    if (age == null || age.isNegative() || age.compareTo(ScheduleConfig.MAX_CLAIM_WINDOW) > 0) {
      throw new IllegalArgumentException(
          "purgeFinishedRunsOlderThan(age): pass how long finished runs are kept, from"
              + " Duration.ZERO to "
              + ScheduleConfig.MAX_CLAIM_WINDOW.toDays()
              + " days, e.g. Duration.ofDays(30); got "
              + age
              + ". Runs inside the claim window ("
              + config.claimWindow()
              + ") and the job's newest run are kept whatever the age.");
    }
    return engine.purgeFinishedRunsOlderThan(age);
  }

  /**
   * Starts the background loop: a single thread that wakes at each scheduled time (and every lease
   * to look for expired runs), runs a pass and reports each outcome to {@link
   * ScheduleConfig#onOutcome()}. A failed pass is logged and retried with backoff.
   *
   * @throws IllegalStateException when already started or closed
   */
  public ScheduledSingleton start() {
    engine.start();
    return this;
  }

  /**
   * Graceful shutdown: no new pass starts; a job that is running is waited for up to {@link
   * ScheduleConfig#shutdownTimeout()} with its lease renewed, then interrupted (it is given back
   * and retried elsewhere). Idempotent.
   */
  @Override
  public void close() {
    engine.close();
  }

  @Override
  public String toString() {
    return "ScheduledSingleton[" + config + "]";
  }
}
