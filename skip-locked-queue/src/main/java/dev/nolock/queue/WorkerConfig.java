package dev.nolock.queue;

import dev.nolock.queue.internal.Arguments;
import io.vavr.control.Option;
import java.time.Duration;
import javax.sql.DataSource;

/**
 * Immutable settings of a {@link WorkerPool}, built with {@link #custom()}; each setter validates
 * at once.
 *
 * <p>Defaults: {@value #DEFAULT_CONCURRENCY} handler threads, claim batches as large as the
 * concurrency, one claim in flight, poll every {@link #DEFAULT_POLL_INTERVAL} (1 s), LISTEN on a
 * connection from the queue's own pool with a {@link #DEFAULT_SELF_TEST_TIMEOUT} (2 s) self-test,
 * heartbeat every third of the lease, reap every {@link #DEFAULT_REAP_INTERVAL} (5 s), no vacuum of
 * its own (autovacuum's job), and wait up to {@link #DEFAULT_SHUTDOWN_TIMEOUT} (30 s) for running
 * handlers on close.
 */
public final class WorkerConfig {

  public static final int DEFAULT_CONCURRENCY = 4;
  public static final Duration DEFAULT_POLL_INTERVAL = Duration.ofSeconds(1);
  public static final Duration DEFAULT_SELF_TEST_TIMEOUT = Duration.ofSeconds(2);
  public static final Duration DEFAULT_REAP_INTERVAL = Duration.ofSeconds(5);
  public static final Duration DEFAULT_SHUTDOWN_TIMEOUT = Duration.ofSeconds(30);

  private final int concurrency;
  private final int batchSize;
  private final int claimsInFlight;
  private final Duration pollInterval;
  private final boolean listen;
  private final DataSource listenDataSource;
  private final Duration selfTestTimeout;
  private final Duration heartbeatInterval;
  private final Duration reapInterval;
  private final Duration vacuumInterval;
  private final Duration shutdownTimeout;

  private WorkerConfig(Builder b) {
    this.concurrency = b.concurrency;
    this.batchSize = b.batchSize > 0 ? b.batchSize : b.concurrency;
    this.claimsInFlight = b.claimsInFlight;
    this.pollInterval = b.pollInterval;
    this.listen = b.listen;
    this.listenDataSource = b.listenDataSource;
    this.selfTestTimeout = b.selfTestTimeout;
    this.heartbeatInterval = b.heartbeatInterval;
    this.reapInterval = b.reapInterval;
    this.vacuumInterval = b.vacuumInterval;
    this.shutdownTimeout = b.shutdownTimeout;
  }

  public static Builder custom() {
    return new Builder();
  }

  public static WorkerConfig ofDefaults() {
    return custom().build();
  }

  /** Handler threads: at most this many jobs run at once in the pool. */
  public int concurrency() {
    return concurrency;
  }

  /**
   * Most jobs per claim statement. The pool holds at most {@link #maxHeld()} claimed jobs and
   * starts a claim when fewer than {@code concurrency + (claimsInFlight - 1) * batchSize} are held
   * or being claimed.
   */
  public int batchSize() {
    return batchSize;
  }

  /** Claim statements the pool keeps in flight at once. */
  public int claimsInFlight() {
    return claimsInFlight;
  }

  /**
   * The most claimed jobs the pool holds (waiting for a thread or running): {@code max(concurrency,
   * batchSize) + (claimsInFlight - 1) * batchSize}.
   */
  int maxHeld() {
    return Math.max(concurrency, batchSize) + (claimsInFlight - 1) * batchSize;
  }

  /** How long the pool waits for a notification before it claims anyway. */
  public Duration pollInterval() {
    return pollInterval;
  }

  /** Whether the pool LISTENs for enqueues. */
  public boolean listen() {
    return listen;
  }

  /** Where the LISTEN connection comes from; empty means the queue's own pool. */
  public Option<DataSource> listenDataSource() {
    return Option.of(listenDataSource);
  }

  /** How long the LISTEN self-test waits for its own notification. */
  public Duration selfTestTimeout() {
    return selfTestTimeout;
  }

  /** How often held jobs' leases are extended; empty means a third of the queue's lease. */
  public Option<Duration> heartbeatInterval() {
    return Option.of(heartbeatInterval);
  }

  /** How often the pool runs {@link JobQueue#reapExpired()}. */
  public Duration reapInterval() {
    return reapInterval;
  }

  /** How often the pool runs {@link JobQueue#vacuum()}; empty (the default) when it does not. */
  public Option<Duration> vacuumInterval() {
    return Option.of(vacuumInterval);
  }

  /** How long {@link WorkerPool#close()} waits for running handlers before interrupting them. */
  public Duration shutdownTimeout() {
    return shutdownTimeout;
  }

  @Override
  public String toString() {
    return "WorkerConfig[concurrency="
        + concurrency
        + ", batchSize="
        + batchSize
        + (claimsInFlight == 1 ? "" : ", claimsInFlight=" + claimsInFlight)
        + ", pollInterval="
        + pollInterval
        + ", listen="
        + listen
        + ", reapInterval="
        + reapInterval
        + (vacuumInterval == null ? "" : ", vacuumInterval=" + vacuumInterval)
        + ", shutdownTimeout="
        + shutdownTimeout
        + "]";
  }

  /** Builds a {@link WorkerConfig}. */
  public static final class Builder {
    private int concurrency = DEFAULT_CONCURRENCY;
    private int batchSize;
    private int claimsInFlight = 1;
    private Duration pollInterval = DEFAULT_POLL_INTERVAL;
    private boolean listen = true;
    private DataSource listenDataSource;
    private Duration selfTestTimeout = DEFAULT_SELF_TEST_TIMEOUT;
    private Duration heartbeatInterval;
    private Duration reapInterval = DEFAULT_REAP_INTERVAL;
    private Duration vacuumInterval;
    private Duration shutdownTimeout = DEFAULT_SHUTDOWN_TIMEOUT;

    private Builder() {}

    /** Handler threads, 1 to 256. Default 4. */
    public Builder concurrency(int threads) {
      if (threads < 1 || threads > 256) {
        throw new IllegalArgumentException(
            "concurrency is the number of handler threads, 1 to 256, got " + threads);
      }
      this.concurrency = threads;
      return this;
    }

    /**
     * Most jobs per claim, 1 to 1000; default the concurrency. Larger batches save round trips but
     * hold jobs before they start: keep {@code batchSize / concurrency * job time} well under the
     * lease (jobs whose lease is nearly over when their turn comes are handed back unrun).
     */
    public Builder batchSize(int size) {
      if (size < 1 || size > 1_000) {
        throw new IllegalArgumentException("batchSize must be 1 to 1000, got " + size);
      }
      this.batchSize = size;
      return this;
    }

    /**
     * Claim statements in flight at once, 1 to 16; default 1. With one, the pool claims again only
     * when the last claim has come back, so handlers faster than a claim's round trip (and its
     * commit) wait for jobs; each claim more keeps up to {@code batchSize} more jobs on hand,
     * claimed ahead of the handlers, so their leases run while they wait (see {@link #batchSize}).
     */
    public Builder claimsInFlight(int claims) {
      if (claims < 1 || claims > 16) {
        throw new IllegalArgumentException(
            "claimsInFlight is the number of claim statements in flight at once, 1 to 16, got "
                + claims);
      }
      this.claimsInFlight = claims;
      return this;
    }

    /**
     * How long an idle pool waits before it claims again, notification or not (10 ms to 10 min). It
     * bounds how late a delayed job starts, and how late any job starts when LISTEN does not work.
     * Default 1 s.
     */
    public Builder pollInterval(Duration interval) {
      this.pollInterval =
          within("pollInterval", interval, Duration.ofMillis(10), Duration.ofMinutes(10));
      return this;
    }

    /** Whether to LISTEN for enqueues; without it the pool only polls. Default true. */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /**
     * A pool of <em>direct</em> connections to PostgreSQL for the one LISTEN connection the worker
     * pool holds open. Needed when the queue's pool goes through PgBouncer in transaction (or
     * statement) pooling, where LISTEN is silently lost. Default: the queue's own pool.
     */
    public Builder listenDataSource(DataSource direct) {
      this.listenDataSource =
          Arguments.required(
              direct, "The listen DataSource", "a direct (not PgBouncer) DataSource");
      return this;
    }

    /**
     * How long the LISTEN self-test waits for the notification it sends itself before it decides
     * LISTEN does not work here (100 ms to 1 min). Default 2 s.
     */
    public Builder selfTestTimeout(Duration timeout) {
      this.selfTestTimeout =
          within("selfTestTimeout", timeout, Duration.ofMillis(100), Duration.ofMinutes(1));
      return this;
    }

    /** How often held jobs' leases are extended (100 ms to 1 h). Default a third of the lease. */
    public Builder heartbeatInterval(Duration interval) {
      this.heartbeatInterval =
          within("heartbeatInterval", interval, Duration.ofMillis(100), Duration.ofHours(1));
      return this;
    }

    /** How often expired leases are taken back (100 ms to 1 h). Default 5 s. */
    public Builder reapInterval(Duration interval) {
      this.reapInterval =
          within("reapInterval", interval, Duration.ofMillis(100), Duration.ofHours(1));
      return this;
    }

    /**
     * Makes the pool run {@link JobQueue#vacuum()} this often (1 s to 24 h), for servers where
     * autovacuum is off or cannot keep up with the queue: without a vacuum, claims slow down as
     * jobs go through (see there). Several pools on one table are fine: a VACUUM that finds another
     * running skips. Default: none.
     */
    public Builder vacuumInterval(Duration interval) {
      this.vacuumInterval =
          within("vacuumInterval", interval, Duration.ofSeconds(1), Duration.ofHours(24));
      return this;
    }

    /**
     * How long {@link WorkerPool#close()} lets running handlers finish (0 to 1 h) before it
     * interrupts them and hands their jobs back. Default 30 s.
     */
    public Builder shutdownTimeout(Duration timeout) {
      this.shutdownTimeout = within("shutdownTimeout", timeout, Duration.ZERO, Duration.ofHours(1));
      return this;
    }

    public WorkerConfig build() {
      return new WorkerConfig(this);
    }

    private static Duration within(String what, Duration value, Duration min, Duration max) {
      Arguments.required(value, what, "a Duration between " + min + " and " + max);
      if (value.compareTo(min) < 0 || value.compareTo(max) > 0) {
        throw new IllegalArgumentException(
            what + " must be between " + min + " and " + max + ", got " + value);
      }
      return value;
    }
  }
}
