package dev.nolock.schedule;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.Listener;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.schedule.internal.CatchUp;
import dev.nolock.schedule.internal.InstanceIdentity;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Clock;
import java.time.Duration;

/**
 * The configuration of one scheduled job on one instance: immutable, built with {@link #custom}
 * whose setters validate at once. Every instance of the fleet must use the same job name, schedule,
 * table and missed-schedules policy; the rest may differ per instance.
 *
 * <h2>Two clocks, on purpose</h2>
 *
 * The <b>schedule</b> is wall-clock time by nature: "every day at 02:00" means 02:00 on the
 * calendar, so scheduled times are computed from {@link #clock()} (a {@link Clock}, injectable for
 * tests). Instances whose wall clocks disagree by a few milliseconds still compute the same
 * scheduled times, because a time is a point in the cron sequence, not a reading of the clock; the
 * skew only decides which instance wakes first. <b>Leases</b>, on the other hand, are decided by
 * the database's {@code clock_timestamp()} alone: a claim holds the run until {@code
 * clock_timestamp() + lease}, and a takeover compares against {@code clock_timestamp()}, so no
 * instance's clock takes part in deciding whether a run is still held.
 *
 * <p>Where the two meet, the database decides: a claim is valid only for a scheduled time no
 * further back than {@link #claimWindow()} and no further ahead than {@link #clockTolerance()} from
 * {@code clock_timestamp()}, and only while the job has no run of a later time, so an instance
 * whose wall clock is behind cannot claim (and run again) a time that was handled, and one whose
 * clock is ahead cannot claim a time that is not due yet.
 */
public final class ScheduleConfig {

  /** The table used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_scheduled_runs";

  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
  public static final int DEFAULT_MAX_ATTEMPTS = 3;
  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(5);
  public static final Duration DEFAULT_SHUTDOWN_TIMEOUT = Duration.ofSeconds(30);

  /** The default {@link #clockTolerance()}. */
  public static final Duration DEFAULT_CLOCK_TOLERANCE = Duration.ofSeconds(5);

  /** The largest {@link Builder#clockTolerance(Duration) clock tolerance} accepted. */
  public static final Duration MAX_CLOCK_TOLERANCE = Duration.ofHours(1);

  /** The smallest default {@link #claimWindow()}, whatever the schedule. */
  public static final Duration MIN_DEFAULT_CLAIM_WINDOW = Duration.ofDays(7);

  /** The smallest {@link Builder#claimWindow(Duration) claim window} accepted. */
  public static final Duration MIN_CLAIM_WINDOW = Duration.ofMinutes(1);

  /** The largest {@link Builder#claimWindow(Duration) claim window} accepted. */
  public static final Duration MAX_CLAIM_WINDOW = Duration.ofDays(36_500);

  /** Longest job name: it is the metrics' {@code job} tag. */
  public static final int MAX_JOB_NAME_LENGTH = CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH;

  /**
   * Missed times are counted by stepping through the schedule; counting stops here, so that a job
   * every second after a month of downtime costs a bounded amount of work. Counts that reach it
   * mean "at least this many".
   */
  public static final int MAX_COUNTED_MISSED = 1000;

  /**
   * Longest {@link Builder#owner(String) owner}: each {@link ScheduledSingleton} appends {@code
   * '#'} and a 16-digit nonce, and the runs table's {@code owner} column holds 255 characters.
   */
  public static final int MAX_OWNER_LENGTH = InstanceIdentity.MAX_OWNER_LENGTH;

  private final String job;
  private final CronSchedule schedule;
  private final String table;
  private final Duration lease;
  private final Duration claimWindow;
  private final Duration clockTolerance;
  private final int maxAttempts;
  private final MissedSchedules missedSchedules;
  private final Clock clock;
  private final String owner;
  private final Duration queryTimeout;
  private final Duration shutdownTimeout;
  private final MeterRegistry registry;
  private final String metricsInstanceName;
  private final Listener<RunOutcome> onOutcome;
  private final ErrorDescriber errorDescriber;
  private final boolean attemptCheck;
  private final boolean renewalAttemptCheck;
  private final boolean claimLock;
  private final boolean retentionGuards;

  private ScheduleConfig(Builder b, Duration claimWindow) {
    this.job = b.job;
    this.schedule = b.schedule;
    this.table = b.table;
    this.lease = b.lease;
    this.claimWindow = claimWindow;
    this.clockTolerance = b.clockTolerance;
    this.maxAttempts = b.maxAttempts;
    this.missedSchedules = b.missedSchedules;
    this.clock = b.clock;
    this.owner = b.owner != null ? b.owner : generatedOwner();
    this.queryTimeout = b.queryTimeout;
    this.shutdownTimeout = b.shutdownTimeout;
    this.registry = b.registry;
    this.metricsInstanceName = b.metricsInstanceName;
    this.onOutcome = b.onOutcome;
    this.errorDescriber = b.errorDescriber;
    this.attemptCheck = b.attemptCheck;
    this.renewalAttemptCheck = b.renewalAttemptCheck;
    this.claimLock = b.claimLock;
    this.retentionGuards = b.retentionGuards;
  }

  /** A configuration for {@code job} on {@code schedule}, with the documented defaults. */
  public static Builder custom(String job, CronSchedule schedule) {
    return new Builder(job, schedule);
  }

  /** The job name: with the scheduled time, the identity of a run. */
  public String job() {
    return job;
  }

  public CronSchedule schedule() {
    return schedule;
  }

  /** The runs table, optionally {@code schema.table}; default {@value #DEFAULT_TABLE}. */
  public String table() {
    return table;
  }

  /**
   * How long a claim holds a run on the database's clock before another instance may take it over;
   * renewed every third of it while the job runs. Default 30 s.
   */
  public Duration lease() {
    return lease;
  }

  /**
   * How far back from the database's clock a newly claimed scheduled time may lie: the claim
   * carries the condition {@code :t >= clock_timestamp() - :window} (with {@code :t <=
   * clock_timestamp() + :clockTolerance}). A time further back is refused ({@link
   * RunOutcome.OutsideClaimWindow}) and never run by this instance. It is the backstop for a job
   * with no rows: a claim is also refused whenever the job has a run of a later time ({@link
   * RunOutcome.Superseded}), whatever the window. It bounds new claims only: a run already claimed
   * and interrupted is taken over, and a claim of this instance whose answer was lost is resumed,
   * whatever its age (up to {@link #maxAttempts()}).
   *
   * <p>Default: twice the catch-up horizon of the schedule and missed-schedules policy, and at
   * least {@link #MIN_DEFAULT_CLAIM_WINDOW 7 days}. The horizon is how old the oldest time of a
   * full catch-up can be, as far as a fixed sample of the schedule shows: the largest span of
   * {@link MissedSchedules#bound()} consecutive intervals among its first {@value
   * dev.nolock.schedule.internal.CatchUp#HORIZON_STEPS} times from 2001-01-01T00:00 in the
   * schedule's zone. It never depends on when the application starts (62 days for a monthly job
   * with {@code runOnce()}), but it is a lower bound: the gaps of a frequent irregular schedule
   * that come later than the sample (an every-second job's nights and weekends) are not in it,
   * which the 7-day minimum covers.
   */
  public Duration claimWindow() {
    return claimWindow;
  }

  /**
   * How far ahead of the database's clock a claimed scheduled time may lie: the skew of a wall
   * clock that is ahead which still claims, so a time is claimed (and run) at most this early. A
   * correct instance never claims a time ahead of the database's clock; one further ahead is
   * refused ({@link RunOutcome.OutsideClaimWindow}, once per time) and claims the time again when
   * the database's clock reaches it. Default {@link #DEFAULT_CLOCK_TOLERANCE 5 s}.
   */
  public Duration clockTolerance() {
    return clockTolerance;
  }

  /**
   * Attempts per run, counting takeovers after a crash and retries after the job threw; after the
   * last one the run is recorded as failed. A lost answer spends none: a claim or takeover whose
   * answer was lost, and a fenced finish whose {@code COMMIT} did not land, are run again by the
   * same instance with the attempt they had. Default {@value #DEFAULT_MAX_ATTEMPTS}.
   */
  public int maxAttempts() {
    return maxAttempts;
  }

  /** What to do with times that passed unclaimed; default {@link MissedSchedules#runOnce()}. */
  public MissedSchedules missedSchedules() {
    return missedSchedules;
  }

  /** The wall clock the scheduled times are computed on; default {@link Clock#systemUTC()}. */
  public Clock clock() {
    return clock;
  }

  /**
   * The configured owner: a name for people, which instances may share. The identity stored in the
   * claims is this plus a nonce per {@link ScheduledSingleton} ({@link
   * ScheduledSingleton#identity()}).
   */
  public String owner() {
    return owner;
  }

  /** The JDBC query timeout of the scheduler's own statements (whole seconds); default 5 s. */
  public Duration queryTimeout() {
    return queryTimeout;
  }

  /** How long {@link ScheduledSingleton#close()} waits for a running job; default 30 s. */
  public Duration shutdownTimeout() {
    return shutdownTimeout;
  }

  /** Where metrics go; empty: recorded nowhere ({@link Builder#metrics} was not called). */
  public Option<MeterRegistry> registry() {
    return Option.of(registry);
  }

  /**
   * The instance name that tags every series of this instance ({@code name=<instanceName>}); empty
   * when no metrics are recorded.
   */
  public Option<String> metricsInstanceName() {
    return Option.of(metricsInstanceName);
  }

  /**
   * Called with every outcome of the background loop, on the scheduler's thread; see {@link
   * Builder#onOutcome}.
   */
  public Listener<RunOutcome> onOutcome() {
    return onOutcome;
  }

  /**
   * What the scheduler records of a failure of your code, the job's or the {@link #onOutcome()}
   * listener's: the job's is stored in the run's {@code last_error}, and both are what the log line
   * gives. Default {@link ErrorDescriber#classNames()}: the class names of the exception and its
   * causes, no message and no stack trace, because a message carries the data the code was working
   * on. The exception itself reaches you in {@link RunOutcome.Failed#error()}.
   */
  public ErrorDescriber errorDescriber() {
    return errorDescriber;
  }

  /** False only in the negative-control tests: finishes ignore the attempt token. */
  boolean attemptCheck() {
    return attemptCheck;
  }

  /** False only in the negative-control tests: renewals ignore the attempt token. */
  boolean renewalAttemptCheck() {
    return renewalAttemptCheck;
  }

  /** False only in the tests' negative control. */
  boolean claimLock() {
    return claimLock;
  }

  /** False only in the tests' negative control: retention deletes whatever is old enough. */
  boolean retentionGuards() {
    return retentionGuards;
  }

  private static String generatedOwner() {
    String host = System.getenv("HOSTNAME");
    if (host == null || host.isBlank() || host.length() > 100) {
      host = "host";
    }
    return host + "/" + ProcessHandle.current().pid();
  }

  @Override
  public String toString() {
    return "ScheduleConfig[job="
        + job
        + ", schedule="
        + schedule
        + ", table="
        + table
        + ", lease="
        + lease
        + ", claimWindow="
        + claimWindow
        + ", clockTolerance="
        + clockTolerance
        + ", maxAttempts="
        + maxAttempts
        + ", missedSchedules="
        + missedSchedules
        + ", owner="
        + owner
        + "]";
  }

  /** Builds a {@link ScheduleConfig}; each setter validates at once. */
  public static final class Builder {
    private final String job;
    private final CronSchedule schedule;
    private String table = DEFAULT_TABLE;
    private Duration lease = DEFAULT_LEASE;
    private Duration claimWindow;
    private Duration clockTolerance = DEFAULT_CLOCK_TOLERANCE;
    private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
    private MissedSchedules missedSchedules = MissedSchedules.runOnce();
    private Clock clock = Clock.systemUTC();
    private String owner;
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;
    private Duration shutdownTimeout = DEFAULT_SHUTDOWN_TIMEOUT;
    private MeterRegistry registry;
    private String metricsInstanceName;
    private Listener<RunOutcome> onOutcome = outcome -> {};
    private ErrorDescriber errorDescriber = ErrorDescriber.classNames();
    private boolean attemptCheck = true;
    private boolean renewalAttemptCheck = true;
    private boolean claimLock = true;
    private boolean retentionGuards = true;

    private Builder(String job, CronSchedule schedule) {
      this.job = Names.requireName("job name", job, MAX_JOB_NAME_LENGTH);
      this.schedule =
          required(
              schedule,
              "custom(job, null): pass the schedule, CronSchedule.unix(\"...\") or"
                  + " CronSchedule.quartz(\"...\")");
    }

    /** The runs table, optionally {@code schema.table}: {@code [a-z_][a-z0-9_]*} per part. */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("runs table", table);
      this.table = table;
      return this;
    }

    /**
     * The claim's lease, 1 s to 1 h. Longer than the longest pause you want to ride out without a
     * takeover; a takeover of a live run costs a second run whose finish is refused, never a second
     * effect.
     */
    public Builder lease(Duration lease) {
      required(lease, "lease(null): pass the claim's lease, e.g. Duration.ofSeconds(30)");
      if (lease.compareTo(Duration.ofSeconds(1)) < 0 || lease.compareTo(Duration.ofHours(1)) > 0) {
        throw new IllegalArgumentException(
            "The lease must be between 1 s and 1 h, got "
                + lease
                + ": it is renewed every third of it while the job runs, so a shorter lease is"
                + " lost to one slow round trip, and a longer one leaves a crashed run waiting.");
      }
      this.lease = lease;
      return this;
    }

    /**
     * How far back from the database's clock a newly claimed scheduled time may lie: 1 min to
     * 36,500 days, and (checked by {@link #build()}) no shorter than the catch-up horizon of the
     * schedule and policy. See {@link ScheduleConfig#claimWindow()} for the default.
     */
    public Builder claimWindow(Duration window) {
      required(
          window,
          "claimWindow(null): pass a window of at least the catch-up horizon, or leave it unset"
              + " for the default");
      if (window.compareTo(MIN_CLAIM_WINDOW) < 0 || window.compareTo(MAX_CLAIM_WINDOW) > 0) {
        throw new IllegalArgumentException(
            "The claim window must be between 1 min and 36500 days, got "
                + window
                + ": a claim is refused when its scheduled time lies further back than the window"
                + " from the database's clock, so a window under a minute refuses instances whose"
                + " clocks are merely a little behind. Leave it unset for the default (twice the"
                + " catch-up horizon, at least 7 days).");
      }
      this.claimWindow = window;
      return this;
    }

    /**
     * How far ahead of the database's clock a claimed scheduled time may lie: 0 to 1 hour. See
     * {@link ScheduleConfig#clockTolerance()}.
     */
    public Builder clockTolerance(Duration tolerance) {
      required(
          tolerance,
          "clockTolerance(null): pass a tolerance from Duration.ZERO to 1 hour, or leave it unset"
              + " for the default, "
              + DEFAULT_CLOCK_TOLERANCE);
      if (tolerance.isNegative() || tolerance.compareTo(MAX_CLOCK_TOLERANCE) > 0) {
        throw new IllegalArgumentException(
            "The clock tolerance must be between 0 and 1 hour, got "
                + tolerance
                + ": it is how early an instance whose clock is ahead may claim and run a"
                + " scheduled time. Fix clocks that are further ahead (NTP) rather than admit"
                + " them; leave it unset for the default, "
                + DEFAULT_CLOCK_TOLERANCE
                + ".");
      }
      this.clockTolerance = tolerance;
      return this;
    }

    /** Attempts per run, 1 to 100. */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1 || maxAttempts > 100) {
        throw new IllegalArgumentException(
            "maxAttempts counts the first attempt too and must be 1 to 100, got " + maxAttempts);
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    public Builder missedSchedules(MissedSchedules policy) {
      this.missedSchedules =
          required(
              policy,
              "missedSchedules(null): pass MissedSchedules.skip(), runOnce() or runEach(bound)");
      return this;
    }

    /** The wall clock for scheduled times (tests pass a fixed or mutable one). */
    public Builder clock(Clock clock) {
      this.clock =
          required(clock, "clock(null): pass the wall clock, e.g. Clock.systemUTC() (the default)");
      return this;
    }

    /**
     * A name for this instance in the runs table and the logs, e.g. the service and pod; at most
     * {@value ScheduleConfig#MAX_OWNER_LENGTH} characters. Default: {@code $HOSTNAME/pid}. It need
     * not be unique: each {@link ScheduledSingleton} stores {@code owner#<nonce>} in its claims,
     * with a random nonce per instance, so instances that share an owner never mistake each other's
     * claims for their own.
     */
    public Builder owner(String owner) {
      if (owner != null && owner.length() > MAX_OWNER_LENGTH) {
        throw new IllegalArgumentException(
            "The owner is "
                + owner.length()
                + " characters long, more than "
                + MAX_OWNER_LENGTH
                + ": each instance stores it with '#' and a 16-digit nonce appended, in a column"
                + " of 255 characters. Shorten it (\""
                + owner.substring(0, 20)
                + "...\"); it only needs to tell people which service and process ran a job.");
      }
      this.owner = Names.requireName("owner", owner, MAX_OWNER_LENGTH);
      return this;
    }

    /** 1 s to 10 min, rounded up to whole seconds (JDBC's unit). */
    public Builder queryTimeout(Duration timeout) {
      required(timeout, "queryTimeout(null): pass a timeout from 1 s to 10 min, e.g. 5 s");
      if (timeout.compareTo(Duration.ofSeconds(1)) < 0
          || timeout.compareTo(Duration.ofMinutes(10)) > 0) {
        throw new IllegalArgumentException(
            "queryTimeout must be between 1 s and 10 min, got " + timeout);
      }
      this.queryTimeout = timeout;
      return this;
    }

    /** How long {@code close()} waits for a running job before interrupting it; 0 to 1 h. */
    public Builder shutdownTimeout(Duration timeout) {
      required(timeout, "shutdownTimeout(null): pass a timeout from 0 to 1 h, e.g. 30 s");
      if (timeout.isNegative() || timeout.compareTo(Duration.ofHours(1)) > 0) {
        throw new IllegalArgumentException(
            "shutdownTimeout must be between 0 and 1 h, got " + timeout);
      }
      this.shutdownTimeout = timeout;
      return this;
    }

    /**
     * Records metrics in {@code registry}, every series tagged {@code component="schedule"} and
     * {@code name=<instanceName>}, the schedule's own meters ({@code nolock.schedule.*}) also
     * {@code job=<job>}. Without this call nothing is recorded.
     *
     * @param instanceName names this scheduler instance in the metrics (e.g. the job name), at most
     *     {@value CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters; give each job its own,
     *     so that two jobs in one registry stay apart. Never a per-run value such as a scheduled
     *     time.
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      required(
          registry,
          "metrics(null, instanceName): pass the MeterRegistry to record in, or leave metrics"
              + " unset to record nothing");
      this.metricsInstanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.registry = registry;
      return this;
    }

    /**
     * Called with every outcome of the background loop (finished, lost, missed, stale, failed), on
     * the scheduler's thread; keep it quick. It may throw, a checked exception too: that call's
     * failure is logged at WARN and counted ({@code nolock.schedule.listener.failures}), and the
     * loop goes on, telling it the next outcomes. An {@code InterruptedException} it throws (a
     * {@code close()} past its shutdown timeout interrupts the loop's thread) is logged and counted
     * too, and the interrupt stays the thread's: the outcomes left of that pass are told with the
     * interrupt flag set.
     */
    public Builder onOutcome(Listener<RunOutcome> listener) {
      this.onOutcome =
          required(
              listener,
              "onOutcome(null): pass a listener, e.g. outcome -> log.info(\"{}\", outcome), or"
                  + " leave it unset");
      return this;
    }

    /**
     * What the scheduler records of a failure of the job (in the run's {@code last_error} and the
     * WARN it logs) and of the {@link #onOutcome} listener (in the WARN); see {@link
     * ScheduleConfig#errorDescriber()}. Default {@link ErrorDescriber#classNames()}. {@link
     * ErrorDescriber#messages()} records the messages too (what earlier versions stored: {@code
     * class: message}), {@link ErrorDescriber#stackTraces()} the whole stack trace, and with them
     * whatever data they quote. A describer that throws or returns null is replaced by the class
     * names for that failure. Texts over 2,000 characters are cut in {@code last_error}.
     */
    public Builder errorDescriber(ErrorDescriber describer) {
      this.errorDescriber = ErrorDescriber.require(describer);
      return this;
    }

    /**
     * The negative control of the tests: finishes match the run by job and time only, so a stale
     * attempt's finish (and a fenced job's writes) commit. Never for production; not public.
     */
    Builder withoutAttemptCheckForNegativeControl() {
      this.attemptCheck = false;
      return this;
    }

    /**
     * The negative control of the tests: renewals match the running run by job and time only, so a
     * stale attempt renews the lease of the attempt that took it over. Never for production; not
     * public.
     */
    Builder withoutRenewalAttemptCheckForNegativeControl() {
      this.renewalAttemptCheck = false;
      return this;
    }

    /**
     * The negative control of the tests: claims of the job are not serialised by the advisory lock,
     * so a claim decides on a snapshot that misses another instance's claim in flight. Never for
     * production; not public.
     */
    Builder withoutClaimLockForNegativeControl() {
      this.claimLock = false;
      return this;
    }

    /**
     * The negative control of the tests: {@link ScheduledSingleton#purgeFinishedRunsOlderThan}
     * deletes every run of the job scheduled more than the given age ago, the newest, those inside
     * the claim window and running ones included. Never for production; not public.
     */
    Builder withoutRetentionGuardsForNegativeControl() {
      this.retentionGuards = false;
      return this;
    }

    private static <T> T required(T value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
      return value;
    }

    /**
     * Builds the configuration; checks the claim window against the catch-up horizon, measured on a
     * fixed sample of the schedule (see {@link ScheduleConfig#claimWindow()}), so the check passes
     * or fails the same whenever it runs.
     */
    public ScheduleConfig build() {
      Duration horizon = CatchUp.horizon(schedule, missedSchedules);
      if (claimWindow == null) {
        Duration twice = horizon.multipliedBy(2);
        Duration window =
            twice.compareTo(MIN_DEFAULT_CLAIM_WINDOW) > 0 ? twice : MIN_DEFAULT_CLAIM_WINDOW;
        return new ScheduleConfig(
            this, window.compareTo(MAX_CLAIM_WINDOW) > 0 ? MAX_CLAIM_WINDOW : window);
      }
      if (claimWindow.compareTo(horizon) < 0) {
        throw new IllegalArgumentException(
            "The claim window "
                + claimWindow
                + " is shorter than the catch-up horizon of the schedule "
                + schedule
                + " with "
                + missedSchedules
                + ", "
                + horizon
                + ": after an outage a catch-up claims times that old, and the database would"
                + " refuse them. Pass claimWindow of at least "
                + horizon
                + ", a smaller runEach bound, or leave the window unset for the default (twice"
                + " the horizon, at least 7 days).");
      }
      return new ScheduleConfig(this, claimWindow);
    }
  }
}
