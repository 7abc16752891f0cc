package dev.nolock.lock;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Listener;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Immutable settings of a {@link FencedLock}, built with {@link #custom(LockPurpose)}; each setter
 * validates at once, and settings that depend on the TTL are checked again at each acquire.
 */
public final class LockConfig {

  /**
   * Longest TTL a lock accepts: a week, the longest lease a {@link Deadline} measures. A daily job
   * without a watchdog may ask for hours. There is no shortest TTL here beyond "positive": a
   * backend that needs a floor enforces its own (Redis and DynamoDB count whole milliseconds; etcd
   * and Kubernetes round up to whole seconds, so they keep a lease longer than asked, never
   * shorter).
   */
  public static final Duration MAX_TTL = Deadline.MAX_LEASE_DURATION;

  /**
   * The fixed part of the time kept back at the point of no return, for scheduling delay and the
   * drift of a short lease; a long lease keeps back more ({@link #safetyMarginFor}).
   */
  public static final Duration DEFAULT_SAFETY_MARGIN = Duration.ofMillis(100);

  /**
   * The assumed bound on how far the holder's monotonic clock and the server's clock disagree on
   * the <em>rate</em> of time, in parts per million: 500 ppm, the frequency tolerance NTP assumes
   * of an undisciplined oscillator (a clock that NTP keeps in step drifts far less). Over a week a
   * lease that long may end up to 302.4 s sooner on the server than on the holder's clock.
   */
  public static final long DEFAULT_CLOCK_DRIFT_PPM = 500;

  /** The largest {@link Builder#clockDriftPpm} accepted: 10 %. */
  public static final long MAX_CLOCK_DRIFT_PPM = 100_000;

  public static final Duration DEFAULT_BACKOFF_BASE = Duration.ofMillis(10);
  public static final Duration DEFAULT_BACKOFF_MAX = Duration.ofMillis(500);

  /**
   * How long the first waiter lets newer callers take a freed lock ahead of it, by default: 20 ms.
   * Measured on a hot name with four waiting threads on PostgreSQL: strict arrival order (zero)
   * halved the lock cycles per second, because each release then waits for the first waiter's round
   * trip; 20 ms kept about three quarters of them and cut the longest wait from over a second to
   * tens of milliseconds.
   */
  public static final Duration DEFAULT_PATIENCE = Duration.ofMillis(20);

  /** The longest {@link Builder#patience} accepted. */
  public static final Duration MAX_PATIENCE = Duration.ofMinutes(1);

  private final LockPurpose purpose;
  private final String owner;
  private final Duration renewalInterval;
  private final boolean autoRenew;
  private final Duration safetyMargin;
  private final long clockDriftPpm;
  private final Listener<LostLease> onLeaseLost;
  private final LeaseClock clock;
  private final CoordinationMetrics metrics;
  private final Duration backoffBase;
  private final Duration backoffMax;
  private final Duration patience;

  private LockConfig(Builder b) {
    this.purpose = b.purpose;
    this.owner = b.owner;
    this.renewalInterval = b.renewalInterval;
    this.autoRenew = b.autoRenew;
    this.safetyMargin = b.safetyMargin;
    this.clockDriftPpm = b.clockDriftPpm;
    this.onLeaseLost = b.onLeaseLost;
    this.clock = b.clock;
    this.metrics = b.metrics;
    this.backoffBase = b.backoffBase;
    this.backoffMax = b.backoffMax;
    this.patience = b.patience;
    if (backoffMax.compareTo(backoffBase) < 0) {
      throw new IllegalArgumentException(
          "backoffMax (" + backoffMax + ") is below backoffBase (" + backoffBase + "): raise it.");
    }
  }

  /** Settings for a lock held for {@code purpose}, with every default. */
  public static LockConfig ofDefaults(LockPurpose purpose) {
    return custom(purpose).build();
  }

  /** A builder for a lock held for {@code purpose}; the caller must say which. */
  public static Builder custom(LockPurpose purpose) {
    return new Builder(purpose);
  }

  public LockPurpose purpose() {
    return purpose;
  }

  /** This process's holder identity, unique per process (not a host name). */
  public String owner() {
    return owner;
  }

  /** The renewal interval, if set; otherwise a third of each lease's TTL. */
  public Option<Duration> renewalInterval() {
    return Option.of(renewalInterval);
  }

  public boolean autoRenew() {
    return autoRenew;
  }

  /** The fixed margin: the least time kept back at each point-of-no-return check. */
  public Duration safetyMargin() {
    return safetyMargin;
  }

  /** The assumed bound on clock-rate drift between holder and server, in parts per million. */
  public long clockDriftPpm() {
    return clockDriftPpm;
  }

  /**
   * The time kept back at the point of no return of a lease counted as {@code leaseLength} long:
   * the larger of {@link #safetyMargin()} and {@code leaseLength x} {@link #clockDriftPpm()}
   * (rounded up to the nanosecond). The holder counts a lease on its own monotonic clock from
   * before its request was sent; a server whose clock runs faster by {@code ppm} ends it up to
   * {@code leaseLength x ppm} sooner in real time, however long ago it began, so the margin grows
   * with the length: 100 ms for every lease up to 200 s with the defaults, 150 ms for 5 minutes,
   * 1.8 s for an hour, 302.4 s for a week.
   */
  public Duration safetyMarginFor(Duration leaseLength) {
    present(leaseLength, "leaseLength");
    // At most a week of nanoseconds (6.05e14) times 1e5: 6.05e19 overflows a long, so divide
    // first and add the remainder's share, rounded up.
    long nanos = leaseLength.toNanos();
    long drift =
        nanos / 1_000_000 * clockDriftPpm
            + (nanos % 1_000_000 * clockDriftPpm + 999_999) / 1_000_000;
    return drift > safetyMargin.toNanos() ? Duration.ofNanos(drift) : safetyMargin;
  }

  /** The hook told of each lost lease; see {@link Builder#onLeaseLost}. */
  public Listener<LostLease> onLeaseLost() {
    return onLeaseLost;
  }

  public LeaseClock clock() {
    return clock;
  }

  public CoordinationMetrics metrics() {
    return metrics;
  }

  public Duration backoffBase() {
    return backoffBase;
  }

  public Duration backoffMax() {
    return backoffMax;
  }

  /** How long the first waiter lets newer callers go ahead of it ({@link Builder#patience}). */
  public Duration patience() {
    return patience;
  }

  /**
   * Checks {@code ttl} against the limits and, with auto-renewal on, against the renewal interval,
   * and returns the renewal interval to use for it. The safety margin is not checked here: a caller
   * that never checks the point of no return may hold a lease shorter than twice the margin ({@link
   * #requireMarginFits} checks it at the point of no return).
   */
  Duration renewalIntervalFor(Duration ttl) {
    requireTtl(ttl);
    // Nanosecond arithmetic: Duration.multipliedBy/dividedBy go through BigDecimal, and this runs
    // on every acquisition attempt (the TTL is at most a week, so nothing overflows).
    long ttlNanos = ttl.toNanos();
    Duration interval =
        renewalInterval != null ? renewalInterval : Duration.ofNanos(Math.max(1, ttlNanos / 3));
    if (autoRenew && 2 * interval.toNanos() > ttlNanos) {
      throw new IllegalArgumentException(
          "The renewal interval "
              + interval
              + " is not comfortably below the TTL "
              + ttl
              + ": one"
              + " late renewal would lose the lease. Renew at most every TTL/2 (the default is"
              + " TTL/3), lengthen the TTL, or turn auto-renewal off.");
    }
    return interval;
  }

  /**
   * Refuses a point-of-no-return check whose margin leaves no usable lease: with {@code 2 *
   * safetyMargin >= ttl} most of each lease would be unusable for writes, which is a configuration
   * error, not a lost lease.
   */
  void requireMarginFits(Duration ttl) {
    if (2 * safetyMargin.toNanos() >= ttl.toNanos()) {
      throw new IllegalArgumentException(
          "The safety margin "
              + safetyMargin
              + " is half the TTL "
              + ttl
              + " or more: every write would fail its point-of-no-return check. Lengthen the TTL or"
              + " shorten the margin (LockConfig.Builder.safetyMargin).");
    }
  }

  private static void requireTtl(Duration ttl) {
    present(ttl, "ttl");
    if (ttl.isNegative() || ttl.isZero() || ttl.compareTo(MAX_TTL) > 0) {
      throw new IllegalArgumentException(
          "A lock TTL of "
              + ttl
              + " is outside (0, "
              + MAX_TTL
              + "]: pick a TTL a few times longer than"
              + " the critical section, e.g. Duration.ofSeconds(10), or for a job without a"
              + " watchdog, longer than the job's longest run.");
    }
  }

  /** Builds a {@link LockConfig}. */
  public static final class Builder {
    private final LockPurpose purpose;
    private String owner = "nolock-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID();
    private Duration renewalInterval;
    private boolean autoRenew = true;
    private Duration safetyMargin = DEFAULT_SAFETY_MARGIN;
    private long clockDriftPpm = DEFAULT_CLOCK_DRIFT_PPM;
    private Listener<LostLease> onLeaseLost = Builder::logLoss;
    private LeaseClock clock = LeaseClock.system();
    private CoordinationMetrics metrics = CoordinationMetrics.noop();
    private Duration backoffBase = DEFAULT_BACKOFF_BASE;
    private Duration backoffMax = DEFAULT_BACKOFF_MAX;
    private Duration patience = DEFAULT_PATIENCE;

    private Builder(LockPurpose purpose) {
      this.purpose = purpose;
      if (purpose == null) {
        throw new IllegalArgumentException(
            "The lock purpose is null. Say why you lock: LockPurpose.EFFICIENCY or"
                + " LockPurpose.CORRECTNESS");
      }
    }

    /**
     * The holder identity of this process, for logs and observers; at most {@value
     * GrantOwner#MAX_PROCESS_OWNER_LENGTH} characters. Each grant adds a nonce of its own ({@code
     * owner#nonce}, see {@link HeldLock#owner()}), so two grants never share an identity, even in
     * one process. The default is the process id plus a random UUID; a host name plus a process id
     * makes lease tables easier to read.
     */
    public Builder owner(String owner) {
      this.owner = GrantOwner.requireProcessOwner("lock owner", owner);
      return this;
    }

    /** How often the watchdog renews; at most half of each lease's TTL. Default: TTL/3. */
    public Builder renewalInterval(Duration renewalInterval) {
      present(renewalInterval, "renewalInterval");
      if (renewalInterval.isNegative() || renewalInterval.isZero()) {
        throw new IllegalArgumentException(
            "The renewal interval must be positive, got " + renewalInterval);
      }
      this.renewalInterval = renewalInterval;
      return this;
    }

    /** Whether a watchdog renews held leases (default true). Without it a lease lives one TTL. */
    public Builder autoRenew(boolean autoRenew) {
      this.autoRenew = autoRenew;
      return this;
    }

    /**
     * The fixed time kept back at each point-of-no-return check (default 100 ms); less than half of
     * the TTL of each lease that checks it (a lease that never checks the point of no return may be
     * shorter). A long lease keeps back its drift instead when that is more ({@link
     * LockConfig#safetyMarginFor}).
     */
    public Builder safetyMargin(Duration safetyMargin) {
      present(safetyMargin, "safetyMargin");
      if (safetyMargin.isNegative()) {
        throw new IllegalArgumentException(
            "The safety margin must be zero or more, got " + safetyMargin);
      }
      this.safetyMargin = safetyMargin;
      return this;
    }

    /**
     * The assumed bound on how far the holder's and the server's clocks disagree on the rate of
     * time, in parts per million, 0 to {@value LockConfig#MAX_CLOCK_DRIFT_PPM} (default {@value
     * LockConfig#DEFAULT_CLOCK_DRIFT_PPM}): the point of no return of a lease keeps back its length
     * times this bound when that is more than the fixed {@link #safetyMargin}. Raise it for
     * machines whose clocks nothing keeps in step; zero trusts the clocks to run at one rate.
     */
    public Builder clockDriftPpm(long ppm) {
      if (ppm < 0 || ppm > MAX_CLOCK_DRIFT_PPM) {
        throw new IllegalArgumentException(
            "The clock drift bound must be between 0 and "
                + MAX_CLOCK_DRIFT_PPM
                + " ppm, got "
                + ppm
                + ": pass parts per million, e.g. 500 (0.05 %).");
      }
      this.clockDriftPpm = ppm;
      return this;
    }

    /**
     * Called once per lost lease (renewal refused, or the lease ran out), on a watchdog thread, or
     * on the caller's when its {@link HeldLock#extend} was refused. Stop the work it protects. It
     * may throw, a checked exception too: that is logged at ERROR with the lease it was told of,
     * and the lock goes on (it keeps renewing the other leases and tells the next loss). An {@code
     * InterruptedException} it throws is logged too, and leaves the thread that called it with its
     * interrupt flag set, so that the caller of {@code extend} sees the interrupt. Default: a
     * warning in the log, except for {@link LostLease.Cause#TTL_REACHED} (auto-renewal off, and the
     * lease simply lived its TTL), which is logged at INFO.
     */
    public Builder onLeaseLost(Listener<LostLease> onLeaseLost) {
      this.onLeaseLost = present(onLeaseLost, "onLeaseLost");
      return this;
    }

    /** The holder's clock; inject a {@link dev.nolock.patterns.ManualLeaseClock} in tests. */
    public Builder clock(LeaseClock clock) {
      this.clock = present(clock, "clock");
      return this;
    }

    /** Records metrics under {@code component=lock, name=instanceName}; never a per-lock key. */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      this.metrics = CoordinationMetrics.of(registry, "lock", instanceName);
      return this;
    }

    /**
     * Backoff between acquire attempts: full jitter from {@code base}, doubling up to {@code max}.
     * A caller waiting in a backend's queue waits for a wake-up instead, and asks again after at
     * most {@code min(max, 1 s)} in case one went missing.
     */
    public Builder backoff(Duration base, Duration max) {
      present(base, "base");
      present(max, "max");
      if (base.isNegative() || base.isZero() || max.compareTo(Duration.ofMinutes(1)) > 0) {
        throw new IllegalArgumentException(
            "Backoff base must be positive and max at most a minute, got " + base + " / " + max);
      }
      this.backoffBase = base;
      this.backoffMax = max;
      return this;
    }

    /**
     * On a backend that queues waiters ({@link dev.nolock.patterns.FairLockBackend}): how long the
     * first waiter lets newer callers take a freed lock ahead of it. While the first waiter has
     * waited less, whoever asks first after a release gets the lock (the releaser asking again at
     * once, most often), which saves the first waiter's round trip on every hand-over; once it has
     * waited longer, everyone else queues behind it. This is the rule of Go's {@code sync.Mutex},
     * whose waiters switch it to "starvation mode" after 1 ms (https://pkg.go.dev/sync#Mutex). Zero
     * serves strictly in arrival order. Default {@link #DEFAULT_PATIENCE}, at most {@link
     * #MAX_PATIENCE}. It bounds how long a waiter can be overtaken by other waiting acquires, not
     * how long it waits for the holders ahead of it; callers that do not queue (a {@code
     * tryAcquire}, an acquire on a process whose backend cannot wake it) can still take a freed
     * lock ahead of it.
     */
    public Builder patience(Duration patience) {
      present(patience, "patience");
      if (patience.isNegative() || patience.compareTo(MAX_PATIENCE) > 0) {
        throw new IllegalArgumentException(
            "The patience must be between zero (strict arrival order) and "
                + MAX_PATIENCE
                + ", got "
                + patience
                + ": use e.g. Duration.ofMillis(20).");
      }
      this.patience = patience;
      return this;
    }

    public LockConfig build() {
      return new LockConfig(this);
    }

    private static void logLoss(LostLease lost) {
      Logger log = LoggerFactory.getLogger(FencedLock.class);
      String message = "Lost lease on {} (token {}): {}";
      if (lost.cause() == LostLease.Cause.TTL_REACHED) {
        log.info(message, lost.name(), lost.token().value(), lost.reason());
      } else {
        log.warn(message, lost.name(), lost.token().value(), lost.reason());
      }
    }
  }

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming the setting: a configuration error
   * is the caller's to fix, never a {@link NullPointerException}.
   */
  private static <V> V present(V value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass a value, or leave the setting out to keep its default.");
    }
    return value;
  }
}
