package dev.nolock.queue;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.internal.Arguments;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;

/**
 * Immutable settings of one {@link JobQueue}, built with {@link #custom(String)}; each setter
 * validates at once and says how to fix a bad value.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE}, lease {@link #DEFAULT_LEASE} (30 s), max attempts
 * {@value #DEFAULT_MAX_ATTEMPTS}, backoff from {@link #DEFAULT_BACKOFF_BASE} (1 s) doubling up to
 * {@link #DEFAULT_BACKOFF_MAX} (10 min) with full jitter, query timeout {@link
 * #DEFAULT_QUERY_TIMEOUT} (10 s), notify on enqueue, NOTIFY channel = the table's name, purge
 * batches of {@value #DEFAULT_PURGE_BATCH_SIZE}, no metrics, the system's monotonic clock, failures
 * recorded by their class names only ({@link ErrorDescriber#classNames()}).
 */
public final class QueueConfig {

  public static final String DEFAULT_TABLE = "nolock_jobs";
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);
  public static final int DEFAULT_MAX_ATTEMPTS = 10;
  public static final Duration DEFAULT_BACKOFF_BASE = Duration.ofSeconds(1);
  public static final Duration DEFAULT_BACKOFF_MAX = Duration.ofMinutes(10);
  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(10);
  public static final int DEFAULT_PURGE_BATCH_SIZE = 1_000;

  /** The ready-depth gauge counts at most this many due jobs, to keep its query cheap. */
  public static final int DEFAULT_READY_COUNT_CAP = 10_000;

  /** The depth and age gauges re-run their query at most this often. */
  public static final Duration DEFAULT_GAUGE_REFRESH = Duration.ofSeconds(10);

  /** Longest queue name: it is a metric tag ({@link CoordinationMetrics}). */
  public static final int MAX_QUEUE_NAME_LENGTH = CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH;

  /**
   * Longest table name (last part): index names add up to 16 characters to it ({@code
   * _pending_key_idx}), and PostgreSQL cuts identifiers at 63.
   */
  public static final int MAX_TABLE_NAME_LENGTH = 47;

  private final String queue;
  private final String table;
  private final String channel;
  private final Duration lease;
  private final int maxAttempts;
  private final Duration backoffBase;
  private final Duration backoffMax;
  private final RetryPolicy backoff;
  private final Duration queryTimeout;
  private final boolean notifyOnEnqueue;
  private final int purgeBatchSize;
  private final int readyCountCap;
  private final Duration gaugeRefresh;
  private final MeterRegistry registry;
  private final String metricsInstanceName;
  private final LeaseClock clock;
  private final ErrorDescriber errorDescriber;

  private QueueConfig(Builder b) {
    this.queue = b.queue;
    this.table = b.table;
    this.channel = b.channel != null ? b.channel : lastPart(b.table);
    this.lease = b.lease;
    this.maxAttempts = b.maxAttempts;
    this.backoffBase = b.backoffBase;
    this.backoffMax = b.backoffMax;
    this.queryTimeout = b.queryTimeout;
    this.notifyOnEnqueue = b.notifyOnEnqueue;
    this.purgeBatchSize = b.purgeBatchSize;
    this.readyCountCap = b.readyCountCap;
    this.gaugeRefresh = b.gaugeRefresh;
    this.registry = b.registry;
    this.metricsInstanceName = b.metricsInstanceName;
    this.clock = b.clock;
    this.errorDescriber = b.errorDescriber;
    this.backoff =
        RetryPolicy.custom()
            .maxAttempts(maxAttempts)
            .baseDelay(backoffBase)
            .maxDelay(backoffMax)
            .build();
  }

  /** A builder for the queue named {@code queue}, starting from the defaults. */
  public static Builder custom(String queue) {
    return new Builder(queue);
  }

  /** Every default, for the queue named {@code queue}. */
  public static QueueConfig ofDefaults(String queue) {
    return custom(queue).build();
  }

  /** The queue's name: the {@code queue} column's value, and the {@code name} metric tag. */
  public String queue() {
    return queue;
  }

  /** The jobs table, {@code table} or {@code schema.table}. */
  public String table() {
    return table;
  }

  /** The LISTEN/NOTIFY channel; the payload of each notification is the queue name. */
  public String channel() {
    return channel;
  }

  /** How long a claim holds a job before the reaper may take it back (database clock). */
  public Duration lease() {
    return lease;
  }

  /** Default attempts per job, including the first; a {@link NewJob} may set its own. */
  public int maxAttempts() {
    return maxAttempts;
  }

  /** The backoff ceiling after the first failure; it doubles with each further failure. */
  public Duration backoffBase() {
    return backoffBase;
  }

  /** The largest backoff ceiling. */
  public Duration backoffMax() {
    return backoffMax;
  }

  /** The backoff as a {@link RetryPolicy} (its {@code maxElapsed} is not used by the queue). */
  public RetryPolicy backoff() {
    return backoff;
  }

  public Duration queryTimeout() {
    return queryTimeout;
  }

  /** Whether enqueue sends {@code pg_notify(channel, queue)} in the enqueueing transaction. */
  public boolean notifyOnEnqueue() {
    return notifyOnEnqueue;
  }

  public int purgeBatchSize() {
    return purgeBatchSize;
  }

  public int readyCountCap() {
    return readyCountCap;
  }

  public Duration gaugeRefresh() {
    return gaugeRefresh;
  }

  /** The registry metrics go to; empty when none was set. */
  public Option<MeterRegistry> registry() {
    return Option.of(registry);
  }

  /** The {@code name} tag of every meter of this queue; empty when no metrics were set. */
  public Option<String> metricsInstanceName() {
    return Option.of(metricsInstanceName);
  }

  public LeaseClock clock() {
    return clock;
  }

  /**
   * What the queue records of a failure of your code: a {@link WorkerPool}'s handler or the writes
   * of its {@link Completion#completeWith}, and the codec failing to decode a payload. Its text is
   * stored in the job's {@code last_error} and is the reason the pool's log line gives. Default
   * {@link ErrorDescriber#classNames()}: the class names of the exception and its causes, no
   * message and no stack trace, because a message carries the payload data the code was working on.
   */
  public ErrorDescriber errorDescriber() {
    return errorDescriber;
  }

  @Override
  public String toString() {
    return "QueueConfig[queue="
        + queue
        + ", table="
        + table
        + ", channel="
        + channel
        + ", lease="
        + lease
        + ", maxAttempts="
        + maxAttempts
        + ", backoff="
        + backoffBase
        + ".."
        + backoffMax
        + ", queryTimeout="
        + queryTimeout
        + ", notifyOnEnqueue="
        + notifyOnEnqueue
        + "]";
  }

  private static String lastPart(String table) {
    return table.substring(table.lastIndexOf('.') + 1);
  }

  /** Builds a {@link QueueConfig}. */
  public static final class Builder {
    private final String queue;
    private String table = DEFAULT_TABLE;
    private String channel;
    private Duration lease = DEFAULT_LEASE;
    private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
    private Duration backoffBase = DEFAULT_BACKOFF_BASE;
    private Duration backoffMax = DEFAULT_BACKOFF_MAX;
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;
    private boolean notifyOnEnqueue = true;
    private int purgeBatchSize = DEFAULT_PURGE_BATCH_SIZE;
    private int readyCountCap = DEFAULT_READY_COUNT_CAP;
    private Duration gaugeRefresh = DEFAULT_GAUGE_REFRESH;
    private MeterRegistry registry;
    private String metricsInstanceName;
    private LeaseClock clock = LeaseClock.system();
    private ErrorDescriber errorDescriber = ErrorDescriber.classNames();

    private Builder(String queue) {
      this.queue = Names.requireName("queue name", queue, MAX_QUEUE_NAME_LENGTH);
    }

    /**
     * The jobs table, optionally schema-qualified ({@code "app.nolock_jobs"}): lower-case letters,
     * digits and underscores, the table part at most {@value #MAX_TABLE_NAME_LENGTH} characters.
     * Several queues may share one table.
     */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("jobs table", table);
      if (lastPart(table).length() > MAX_TABLE_NAME_LENGTH) {
        throw new IllegalArgumentException(
            "The jobs table name \""
                + lastPart(table)
                + "\" is longer than "
                + MAX_TABLE_NAME_LENGTH
                + " characters: the index names append a suffix and"
                + " PostgreSQL truncates identifiers at 63. Choose a shorter name.");
      }
      this.table = table;
      return this;
    }

    /** The LISTEN/NOTIFY channel, a plain identifier; default the table's name (last part). */
    public Builder channel(String channel) {
      if (SqlNames.requireSqlIdentifier("notify channel", channel).parts().length != 1) {
        throw new IllegalArgumentException(
            "The notify channel \"" + channel + "\" must be one identifier, without a schema.");
      }
      this.channel = channel;
      return this;
    }

    /**
     * How long a claim holds a job (whole milliseconds, 1 s to 1 day). A worker that has not
     * finished or heartbeated within it loses the job to the reaper; the worker pool heartbeats
     * every third of it. Default 30 s.
     */
    public Builder lease(Duration lease) {
      Arguments.required(lease, "The lease", "e.g. Duration.ofSeconds(30)");
      if (lease.compareTo(Duration.ofSeconds(1)) < 0 || lease.compareTo(Duration.ofDays(1)) > 0) {
        throw new IllegalArgumentException(
            "The lease must be between 1 s and 1 day, got "
                + lease
                + ": shorter leases expire"
                + " during a GC pause, longer ones leave a crashed worker's jobs stuck for long.");
      }
      this.lease = lease;
      return this;
    }

    /** Attempts per job in all, including the first (1 to 1000). Default 10. */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1 || maxAttempts > NewJob.MAX_ATTEMPTS_LIMIT) {
        throw new IllegalArgumentException(
            "maxAttempts counts the first attempt too and must be 1 to "
                + NewJob.MAX_ATTEMPTS_LIMIT
                + ", got "
                + maxAttempts);
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /**
     * Exponential backoff with full jitter after a failure: the n-th failure re-queues the job at
     * the database's clock plus a uniform delay in {@code [0, min(max, base * 2^(n-1))]}. Base from
     * zero to 1 h, max from base to 1 h. Default 1 s .. 10 min.
     */
    public Builder backoff(Duration base, Duration max) {
      Arguments.required(base, "The backoff base", "e.g. Duration.ofSeconds(1)");
      Arguments.required(max, "The backoff max", "e.g. Duration.ofMinutes(10)");
      // RetryPolicy validates both and their order; build one now so a mistake fails here.
      RetryPolicy.custom().baseDelay(base).maxDelay(max).build();
      this.backoffBase = base;
      this.backoffMax = max;
      return this;
    }

    /**
     * How long one queue statement may run before pgjdbc cancels it; whole seconds, 1 s to 5 min.
     * Default 10 s.
     */
    public Builder queryTimeout(Duration timeout) {
      Arguments.required(timeout, "The query timeout", "e.g. Duration.ofSeconds(10)");
      if (timeout.compareTo(Duration.ofSeconds(1)) < 0
          || timeout.compareTo(Duration.ofMinutes(5)) > 0
          || timeout.toNanos() % 1_000_000_000L != 0) {
        throw new IllegalArgumentException(
            "The query timeout must be whole seconds between 1 s and 5 min (JDBC counts it in"
                + " seconds), got "
                + timeout
                + ": use e.g. Duration.ofSeconds(10).");
      }
      this.queryTimeout = timeout;
      return this;
    }

    /**
     * Whether enqueue sends a NOTIFY (in the enqueueing transaction, so it fires on commit) to wake
     * listening workers. Default true; turn it off when no worker listens.
     */
    public Builder notifyOnEnqueue(boolean notify) {
      this.notifyOnEnqueue = notify;
      return this;
    }

    /** Rows deleted per retention statement, 1 to 100,000. Default 1000. */
    public Builder purgeBatchSize(int size) {
      if (size < 1 || size > 100_000) {
        throw new IllegalArgumentException("purgeBatchSize must be 1 to 100,000, got " + size);
      }
      this.purgeBatchSize = size;
      return this;
    }

    /**
     * The most due jobs the ready-depth gauge counts (1 to 10,000,000); above it the gauge reads
     * the cap. Default 10,000.
     */
    public Builder readyCountCap(int cap) {
      if (cap < 1 || cap > 10_000_000) {
        throw new IllegalArgumentException("readyCountCap must be 1 to 10,000,000, got " + cap);
      }
      this.readyCountCap = cap;
      return this;
    }

    /** The depth and age gauges query at most once per this interval (0 to 1 h). Default 10 s. */
    public Builder gaugeRefresh(Duration refresh) {
      Arguments.required(refresh, "gaugeRefresh", "e.g. Duration.ofSeconds(10)");
      if (refresh.isNegative() || refresh.compareTo(Duration.ofHours(1)) > 0) {
        throw new IllegalArgumentException("gaugeRefresh must be 0 to 1 h, got " + refresh);
      }
      this.gaugeRefresh = refresh;
      return this;
    }

    /**
     * Records the queue's meters in {@code registry}, every one tagged {@code component="queue"}
     * and {@code name=instanceName}; the queue's own meters ({@code nolock.queue.*}) carry {@code
     * queue=<queue>} too. Two queue instances in one registry stay apart by their instance names.
     * Default: nothing recorded.
     *
     * @param instanceName names this queue instance (e.g. the queue's name, or {@code
     *     "receipts-eu"}); never a per-job value such as a job id or key
     * @throws IllegalArgumentException when {@code registry} is null or {@code instanceName} is not
     *     a name of 1 to {@value CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      if (registry == null) {
        throw new IllegalArgumentException(
            "metrics(registry, instanceName) needs a MeterRegistry; leave metrics(...) out to"
                + " record nothing.");
      }
      this.metricsInstanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.registry = registry;
      return this;
    }

    /** The monotonic clock for the holder-side lease deadlines. Default the system's. */
    public Builder clock(LeaseClock clock) {
      this.clock = Arguments.required(clock, "The clock", "e.g. LeaseClock.system()");
      return this;
    }

    /**
     * What the queue records of a failure of your code (a handler, its completion's writes, the
     * codec decoding a payload) in {@code last_error} and in the pool's log line; see {@link
     * QueueConfig#errorDescriber()}. Default {@link ErrorDescriber#classNames()}. {@link
     * ErrorDescriber#messages()} or {@link ErrorDescriber#stackTraces()} (what earlier versions
     * stored) record the messages too, and with them whatever payload data they quote. A describer
     * that throws or returns null is replaced by the class names for that failure. Texts over 8,000
     * characters are cut.
     */
    public Builder errorDescriber(ErrorDescriber describer) {
      this.errorDescriber = ErrorDescriber.require(describer);
      return this;
    }

    public QueueConfig build() {
      return new QueueConfig(this);
    }
  }
}
