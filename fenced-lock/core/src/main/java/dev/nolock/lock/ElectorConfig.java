package dev.nolock.lock;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.locks.Condition;

/**
 * Immutable settings of a {@link LeaderElector}, with the arithmetic of Kubernetes leader election
 * checked at {@link Builder#build()}:
 *
 * <ul>
 *   <li>{@code leaseDuration > renewDeadline}: the leader must give up <em>before</em> its lease
 *       can expire, or a new leader could start while the old one still works;
 *   <li>{@code renewDeadline > retryPeriod × (1 + jitter)}: the leader must get more than one
 *       renewal attempt before it gives up, or one slow call ends its leadership.
 * </ul>
 *
 * Defaults follow client-go: 15 s, 10 s, 2 s, jitter 1.2. {@code workStopTimeout} (default 10 s)
 * bounds how long {@link LeaderElector#close()} waits for the leader's work to end before it
 * releases the lease, how long a lost term's lease is kept while its work still runs, and when a
 * lost term's work that a candidate waits for is reported.
 */
public final class ElectorConfig {

  public static final Duration DEFAULT_LEASE_DURATION = Duration.ofSeconds(15);
  public static final Duration DEFAULT_RENEW_DEADLINE = Duration.ofSeconds(10);
  public static final Duration DEFAULT_RETRY_PERIOD = Duration.ofSeconds(2);
  public static final double JITTER_FACTOR = 1.2;
  public static final Duration DEFAULT_WORK_STOP_TIMEOUT = Duration.ofSeconds(10);
  static final Duration MAX_WORK_STOP_TIMEOUT = Duration.ofMinutes(10);

  /**
   * How the elector's campaign thread waits between its checks: on {@code wake}, which the elector
   * signals when a lease is lost or it is closed, for at most {@code duration}. Tests replace it to
   * read the waits back and move a manual clock instead of blocking.
   */
  @FunctionalInterface
  interface Pause {
    void await(Condition wake, Duration duration) throws InterruptedException;
  }

  private final String name;
  private final String identity;
  private final Duration leaseDuration;
  private final Duration renewDeadline;
  private final Duration retryPeriod;
  private final Duration workStopTimeout;
  private final boolean haltOnLoss;
  private final Runnable halt;
  private final LeaseClock clock;
  private final MeterRegistry registry;
  private final String instanceName;
  private final Pause pause;

  private ElectorConfig(Builder b) {
    this.name = b.name;
    this.identity = b.identity;
    this.leaseDuration = b.leaseDuration;
    this.renewDeadline = b.renewDeadline;
    this.retryPeriod = b.retryPeriod;
    this.workStopTimeout = b.workStopTimeout;
    this.haltOnLoss = b.haltOnLoss;
    this.halt = b.halt;
    this.clock = b.clock;
    this.registry = b.registry;
    this.instanceName = b.instanceName;
    this.pause = b.pause;
    if (leaseDuration.compareTo(renewDeadline) <= 0) {
      throw new IllegalArgumentException(
          "leaseDuration ("
              + leaseDuration
              + ") must be greater than renewDeadline ("
              + renewDeadline
              + "): a leader that keeps trying to renew until its lease has"
              + " expired can still be working when the next leader starts.");
    }
    Duration jittered = Duration.ofNanos((long) (retryPeriod.toNanos() * JITTER_FACTOR));
    if (renewDeadline.compareTo(jittered) <= 0) {
      throw new IllegalArgumentException(
          "renewDeadline ("
              + renewDeadline
              + ") must be greater than retryPeriod x "
              + JITTER_FACTOR
              + " ("
              + jittered
              + "): otherwise a single slow renewal ends the"
              + " leadership.");
    }
  }

  /** Settings for the election called {@code name} (the lock name). */
  public static Builder custom(String name) {
    return new Builder(name);
  }

  public String name() {
    return name;
  }

  public String identity() {
    return identity;
  }

  public Duration leaseDuration() {
    return leaseDuration;
  }

  public Duration renewDeadline() {
    return renewDeadline;
  }

  public Duration retryPeriod() {
    return retryPeriod;
  }

  public Duration workStopTimeout() {
    return workStopTimeout;
  }

  public boolean haltOnLoss() {
    return haltOnLoss;
  }

  Runnable halt() {
    return halt;
  }

  public LeaseClock clock() {
    return clock;
  }

  /** Where the metrics go, from {@link Builder#metrics}; none without it (nothing recorded). */
  public Option<MeterRegistry> registry() {
    return Option.of(registry);
  }

  /** The {@code name} tag of this elector's metrics: the election name unless configured. */
  public String instanceName() {
    return instanceName;
  }

  Pause pause() {
    return pause;
  }

  /** Builds an {@link ElectorConfig}. */
  public static final class Builder {
    private final String name;
    private String identity = "nolock-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID();
    private Duration leaseDuration = DEFAULT_LEASE_DURATION;
    private Duration renewDeadline = DEFAULT_RENEW_DEADLINE;
    private Duration retryPeriod = DEFAULT_RETRY_PERIOD;
    private Duration workStopTimeout = DEFAULT_WORK_STOP_TIMEOUT;
    private boolean haltOnLoss = true;
    private Runnable halt = () -> Runtime.getRuntime().halt(1);
    private LeaseClock clock = LeaseClock.system();
    private MeterRegistry registry;
    private String instanceName;
    private Pause pause = (wake, duration) -> wake.awaitNanos(duration.toNanos());

    private Builder(String name) {
      this.name = Names.requireName("election name", name, Lease.MAX_NAME_LENGTH);
      this.instanceName = this.name;
    }

    /**
     * This candidate's identity, unique per process, at most {@value
     * GrantOwner#MAX_PROCESS_OWNER_LENGTH} characters (each term's lease adds a nonce). Default:
     * pid plus a random UUID.
     */
    public Builder identity(String identity) {
      this.identity = GrantOwner.requireProcessOwner("candidate identity", identity);
      return this;
    }

    /** How long a lease lasts without renewal; between 1 s and 10 min. */
    public Builder leaseDuration(Duration d) {
      this.leaseDuration =
          within("leaseDuration", d, Duration.ofSeconds(1), Duration.ofMinutes(10));
      return this;
    }

    /** How long the leader keeps failing to renew before it steps down. */
    public Builder renewDeadline(Duration d) {
      this.renewDeadline =
          within("renewDeadline", d, Duration.ofMillis(200), Duration.ofMinutes(10));
      return this;
    }

    /** How often candidates retry and the leader renews (jittered by up to x1.2). */
    public Builder retryPeriod(Duration d) {
      this.retryPeriod = within("retryPeriod", d, Duration.ofMillis(50), Duration.ofMinutes(5));
      return this;
    }

    /**
     * How long {@link LeaderElector#close()} waits for the leader's work thread to end, after
     * interrupting it and calling {@link Leadership#onStoppedLeading}, before it releases the lease
     * anyway (logged at error level and counted as {@code nolock.leadership.work.overruns}).
     * Interrupts do not shorten the wait. While it waits the lease is renewed and watched: if it is
     * lost meanwhile, the process halts unless {@link #haltOnLoss haltOnLoss(false)}. Between zero
     * (release at once) and 10 min; default 10 s.
     *
     * <p>After a lost lease the lost term's lease is released once its work has ended or after this
     * timeout, and without a halt the candidate does not campaign again until that work has ended;
     * past this timeout that work is logged and counted the same way, and the candidate goes on
     * waiting for it. close() also waits up to this timeout plus {@code leaseDuration} for the
     * campaign thread to stop.
     */
    public Builder workStopTimeout(Duration d) {
      present(d, "workStopTimeout");
      if (d.isNegative() || d.compareTo(MAX_WORK_STOP_TIMEOUT) > 0) {
        throw new IllegalArgumentException(
            "workStopTimeout must be between PT0S and "
                + MAX_WORK_STOP_TIMEOUT
                + ", got "
                + d
                + ": pass how long close() may wait for the leader's work to end after it is"
                + " interrupted, e.g. Duration.ofSeconds(10); Duration.ZERO releases the lease"
                + " without waiting.");
      }
      this.workStopTimeout = d;
      return this;
    }

    /**
     * Whether losing leadership halts the process (default true). A leader that keeps running after
     * losing its lease is the failure, and a halt is the only stop that cannot be ignored by a
     * thread that does not check for interrupts; embedders that stop their work reliably may turn
     * it off.
     */
    public Builder haltOnLoss(boolean haltOnLoss) {
      this.haltOnLoss = haltOnLoss;
      return this;
    }

    /** What halting does; tests replace {@code Runtime.halt(1)}. */
    Builder halt(Runnable halt) {
      this.halt = present(halt, "halt");
      return this;
    }

    /** How the campaign thread waits; tests replace the wait on the elector's condition. */
    Builder pause(Pause pause) {
      this.pause = present(pause, "pause");
      return this;
    }

    public Builder clock(LeaseClock clock) {
      this.clock = present(clock, "clock");
      return this;
    }

    /**
     * Records metrics in {@code registry}, tagged {@code component="election"} and {@code
     * name=instanceName} (one configured name per elector, e.g. the election name, at most {@value
     * CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters); without it nothing is recorded.
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      if (registry == null) {
        throw new IllegalArgumentException(
            "The meter registry is null: pass the application's MeterRegistry, or do not call"
                + " metrics(...) to record nothing.");
      }
      this.instanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.registry = registry;
      return this;
    }

    public ElectorConfig build() {
      return new ElectorConfig(this);
    }

    private static Duration within(String what, Duration d, Duration min, Duration max) {
      present(d, what);
      if (d.compareTo(min) < 0 || d.compareTo(max) > 0) {
        throw new IllegalArgumentException(
            what + " must be between " + min + " and " + max + ", got " + d);
      }
      return d;
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
