package dev.nolock.idempotency;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.sql.SqlNames;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;

/**
 * Immutable settings of {@link IdempotencyKeys}, built with {@link #custom()}; each setter
 * validates at once, {@link Builder#build()} checks them together.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE}, lease {@link #DEFAULT_LEASE} (30 s), retention {@link
 * #DEFAULT_RETENTION} (24 h), no waiting while a key is in progress ({@link RetryPolicy#noRetry()})
 * and, once waiting is configured, at most {@value #DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS} calls
 * waiting at once, purge batches of {@value #DEFAULT_PURGE_BATCH_SIZE} rows, query timeout {@link
 * #DEFAULT_QUERY_TIMEOUT} (5 s), metrics recorded nowhere (the abandoned-keys gauge named after the
 * table) and, once recorded, counters for at most {@value #DEFAULT_MAX_METERED_SCOPES} scopes, the
 * system's monotonic clock.
 */
public final class IdempotencyConfig {

  /** The keys table used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_idempotency_keys";

  /** How long an attempt holds a key before a retry may take it over. */
  public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);

  /** How long a key is kept after it completed (in progress: after its last claim or phase). */
  public static final Duration DEFAULT_RETENTION = Duration.ofHours(24);

  public static final int DEFAULT_PURGE_BATCH_SIZE = 1000;

  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(5);

  /**
   * Longest table name (its last part): the sequence {@code <table>_attempt_seq} and the index
   * {@code <table>_expires_idx} must fit PostgreSQL's 63-byte identifiers.
   */
  public static final int MAX_TABLE_NAME_LENGTH = 50;

  public static final Duration MIN_LEASE = Duration.ofSeconds(1);
  public static final Duration MAX_RETENTION = Duration.ofDays(366);
  public static final Duration MAX_QUERY_TIMEOUT = Duration.ofMinutes(5);

  /** How many calls of one {@link IdempotencyKeys} may wait for keys in progress at once. */
  public static final int DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS = 16;

  /** How many distinct scopes get counters of their own. */
  public static final int DEFAULT_MAX_METERED_SCOPES = 100;

  /**
   * Upper limit of {@link Builder#maxWaitingWhileInProgress} and {@link Builder#maxMeteredScopes}.
   */
  public static final int MAX_BOUND = 10_000;

  private final String table;
  private final Duration lease;
  private final Duration retention;
  private final RetryPolicy waitWhileInProgress;
  private final int maxWaitingWhileInProgress;
  private final int purgeBatchSize;
  private final Duration queryTimeout;
  private final MeterRegistry meterRegistry;
  private final String metricsInstanceName;
  private final int maxMeteredScopes;
  private final LeaseClock clock;

  private IdempotencyConfig(Builder builder) {
    this.table = builder.table;
    this.lease = builder.lease;
    this.retention = builder.retention;
    this.waitWhileInProgress = builder.waitWhileInProgress;
    this.maxWaitingWhileInProgress = builder.maxWaitingWhileInProgress;
    this.purgeBatchSize = builder.purgeBatchSize;
    this.queryTimeout = builder.queryTimeout;
    this.meterRegistry = builder.meterRegistry;
    this.metricsInstanceName =
        builder.metricsInstanceName != null ? builder.metricsInstanceName : builder.table;
    this.maxMeteredScopes = builder.maxMeteredScopes;
    this.clock = builder.clock;
  }

  public static IdempotencyConfig ofDefaults() {
    return custom().build();
  }

  public static Builder custom() {
    return new Builder();
  }

  /** The keys table, {@code table} or {@code schema.table}. */
  public String table() {
    return table;
  }

  public Duration lease() {
    return lease;
  }

  public Duration retention() {
    return retention;
  }

  public RetryPolicy waitWhileInProgress() {
    return waitWhileInProgress;
  }

  /** From {@link Builder#maxWaitingWhileInProgress}. */
  public int maxWaitingWhileInProgress() {
    return maxWaitingWhileInProgress;
  }

  public int purgeBatchSize() {
    return purgeBatchSize;
  }

  public Duration queryTimeout() {
    return queryTimeout;
  }

  /** Where the metrics go, from {@link Builder#metrics}; none without it (nothing recorded). */
  public Option<MeterRegistry> meterRegistry() {
    return Option.of(meterRegistry);
  }

  /**
   * The {@code name} tag of every series, from {@link Builder#metrics}; without it the table as
   * configured.
   */
  public String metricsInstanceName() {
    return metricsInstanceName;
  }

  /** From {@link Builder#maxMeteredScopes}. */
  public int maxMeteredScopes() {
    return maxMeteredScopes;
  }

  public LeaseClock clock() {
    return clock;
  }

  @Override
  public String toString() {
    return "IdempotencyConfig[table="
        + table
        + ", lease="
        + lease
        + ", retention="
        + retention
        + ", waitWhileInProgress="
        + waitWhileInProgress
        + ", maxWaitingWhileInProgress="
        + maxWaitingWhileInProgress
        + ", purgeBatchSize="
        + purgeBatchSize
        + ", queryTimeout="
        + queryTimeout
        + ", metricsInstanceName="
        + metricsInstanceName
        + ", maxMeteredScopes="
        + maxMeteredScopes
        + "]";
  }

  /** Builds an {@link IdempotencyConfig}. */
  public static final class Builder {
    private String table = DEFAULT_TABLE;
    private Duration lease = DEFAULT_LEASE;
    private Duration retention = DEFAULT_RETENTION;
    private RetryPolicy waitWhileInProgress = RetryPolicy.noRetry();
    private int maxWaitingWhileInProgress = DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS;
    private int purgeBatchSize = DEFAULT_PURGE_BATCH_SIZE;
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;
    private MeterRegistry meterRegistry;
    private String metricsInstanceName;
    private int maxMeteredScopes = DEFAULT_MAX_METERED_SCOPES;
    private LeaseClock clock = LeaseClock.system();

    private Builder() {}

    /**
     * The keys table, optionally schema-qualified ({@code "app.idempotency_keys"}): lower-case
     * letters, digits and underscores, the table part at most {@value
     * IdempotencyConfig#MAX_TABLE_NAME_LENGTH} characters. Default {@value
     * IdempotencyConfig#DEFAULT_TABLE}.
     */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("idempotency keys table", table);
      String last = table.substring(table.lastIndexOf('.') + 1);
      if (last.length() > MAX_TABLE_NAME_LENGTH) {
        throw new IllegalArgumentException(
            "The idempotency keys table \""
                + table
                + "\" is longer than "
                + MAX_TABLE_NAME_LENGTH
                + " characters: its sequence (<table>_attempt_seq) and index (<table>_expires_idx)"
                + " would not fit PostgreSQL's 63-byte names. Use a shorter name.");
      }
      this.table = table;
      return this;
    }

    /**
     * How long an attempt holds a key, on the database's clock, before a retry may take it over
     * with a higher attempt token. Extended each time a phase commits. Make it longer than the
     * slowest action (or phase): a lease that ends mid-action lets a retry run the action too (its
     * local effects stay single, the stale attempt is refused; foreign calls are repeated). From
     * {@link IdempotencyConfig#MIN_LEASE} to {@link Deadline#MAX_LEASE_DURATION}, whole
     * milliseconds. Default 30 s.
     */
    public Builder lease(Duration lease) {
      required(lease, "lease(null): pass a Duration, e.g. Duration.ofSeconds(30) (the default)");
      if (lease.compareTo(MIN_LEASE) < 0
          || lease.compareTo(Deadline.MAX_LEASE_DURATION) > 0
          || lease.toNanos() % 1_000_000 != 0) {
        throw new IllegalArgumentException(
            "The lease must be whole milliseconds from "
                + MIN_LEASE
                + " to "
                + Deadline.MAX_LEASE_DURATION
                + ", got "
                + lease
                + ": use e.g. Duration.ofSeconds(30).");
      }
      this.lease = lease;
      return this;
    }

    /**
     * How long a key is kept before {@link IdempotencyKeys#purgeExpired()} may delete it: after it
     * completed; while in progress, after its last activity (the claim, a takeover, a committed
     * phase). After that the same key is a new request. An in-progress key past {@value
     * Phases#STARTED} is never purged, whatever its age: it is counted as abandoned and kept until
     * it completes or is {@linkplain IdempotencyKeys#forget forgotten}. Longer than the lease, at
     * most {@link IdempotencyConfig#MAX_RETENTION}, whole milliseconds. Default 24 h (Stripe's).
     */
    public Builder retention(Duration retention) {
      required(
          retention, "retention(null): pass a Duration, e.g. Duration.ofHours(24) (the default)");
      if (retention.compareTo(MIN_LEASE) < 0
          || retention.compareTo(MAX_RETENTION) > 0
          || retention.toNanos() % 1_000_000 != 0) {
        throw new IllegalArgumentException(
            "The retention must be whole milliseconds from "
                + MIN_LEASE
                + " to "
                + MAX_RETENTION
                + ", got "
                + retention
                + ": use e.g. Duration.ofHours(24).");
      }
      this.retention = retention;
      return this;
    }

    /**
     * Whether and how long a call that finds its key in progress waits for it: the call is repeated
     * with {@code policy}'s backoff (a sleep between statements, never a spin) until the key
     * completes (a {@link Outcome.Replayed}), its lease expires (this call takes over), or the
     * policy gives up ({@link Outcome.RequestInProgress}). Default {@link RetryPolicy#noRetry()}:
     * answer {@code RequestInProgress} at once, the draft's 409. Each waiting call holds its
     * thread: see {@link #maxWaitingWhileInProgress} for the bound.
     */
    public Builder waitWhileInProgress(RetryPolicy policy) {
      this.waitWhileInProgress =
          required(
              policy,
              "waitWhileInProgress(null): pass a RetryPolicy, or RetryPolicy.noRetry() (the"
                  + " default) not to wait");
      return this;
    }

    /**
     * How many calls of one {@link IdempotencyKeys} may wait at once under {@link
     * #waitWhileInProgress}, 1 to {@value IdempotencyConfig#MAX_BOUND}; default {@value
     * IdempotencyConfig#DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS}. A waiting call holds its thread, so
     * without a bound duplicates of one slow request (a client retrying in a loop, or someone
     * repeating a key on purpose) hold as many threads as they send. A call that finds its key in
     * progress takes a permit, without blocking, before its first backoff and gives it back however
     * the wait ends (answer, give-up, interrupt, exception); with none left it does not wait and is
     * answered {@link Outcome.RequestInProgress} at once, counted in {@code
     * nolock.idempotency.waits.refused}.
     */
    public Builder maxWaitingWhileInProgress(int calls) {
      this.maxWaitingWhileInProgress =
          bound(
              calls,
              "maxWaitingWhileInProgress",
              "calls waiting at once for a key in progress; each holds a thread, so keep it well"
                  + " below your request threads");
      return this;
    }

    /** Rows deleted per purge transaction, 1 to 100 000. Default 1000. */
    public Builder purgeBatchSize(int rows) {
      if (rows < 1 || rows > 100_000) {
        throw new IllegalArgumentException(
            "The purge batch size must be 1 to 100000 rows, got "
                + rows
                + ": small batches keep each delete transaction short.");
      }
      this.purgeBatchSize = rows;
      return this;
    }

    /**
     * How long one of this library's own statements may run before pgjdbc cancels it; whole seconds
     * from 1 s to 5 min. Does not apply to the statements of your action. Default 5 s.
     */
    public Builder queryTimeout(Duration timeout) {
      required(
          timeout, "queryTimeout(null): pass a Duration, e.g. Duration.ofSeconds(5) (the default)");
      if (timeout.compareTo(Duration.ofSeconds(1)) < 0
          || timeout.compareTo(MAX_QUERY_TIMEOUT) > 0
          || timeout.toNanos() % 1_000_000_000L != 0) {
        throw new IllegalArgumentException(
            "The query timeout must be whole seconds between 1 s and "
                + MAX_QUERY_TIMEOUT
                + " (JDBC counts it in seconds), got "
                + timeout
                + ": use e.g. Duration.ofSeconds(5).");
      }
      this.queryTimeout = timeout;
      return this;
    }

    /**
     * Records metrics in {@code registry} (see the README's Metrics): the counters, tagged {@code
     * component="idempotency"}, {@code name=instanceName} and {@code scope=<scope>}, and the
     * abandoned-keys gauge, tagged {@code component="idempotency"} and {@code name=instanceName}.
     * Without it nothing is recorded.
     *
     * <p>The instance name names the keys table of one database (e.g. {@code "payments-eu"}). There
     * is one gauge per registry and instance name, and it reads the {@link IdempotencyKeys} created
     * last with that name that is still in use: a component re-created on a fresh pool takes the
     * gauge over. So when one registry sees keys tables in several databases (shards, tenants),
     * give each database its own instance name, or the gauge shows only the newest instance's
     * table.
     *
     * @param instanceName at most {@value CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters,
     *     no control characters; never a per-request value such as a key
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      if (registry == null) {
        throw new IllegalArgumentException(
            "metrics(null, instanceName): pass the MeterRegistry to record in, or leave metrics"
                + " unset to record nothing");
      }
      this.metricsInstanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.meterRegistry = registry;
      return this;
    }

    /**
     * How many distinct scopes get counters of their own in one {@link IdempotencyKeys}, 1 to
     * {@value IdempotencyConfig#MAX_BOUND}; default {@value
     * IdempotencyConfig#DEFAULT_MAX_METERED_SCOPES}. Each scope is a tag value, a series the
     * registry and the backend keep for good; a caller passing a per-request value as the scope
     * would add series without bound. Later scopes share the counters tagged {@code _overflow} (no
     * scope may start with {@code '_'}); the first of them logs one WARN with the cap and the fix,
     * not the scope (it may come from a request). The cap never refuses a call. It applies only to
     * what is recorded: without {@link #metrics} no counter is kept per scope, so nothing is capped
     * and nothing logged.
     */
    public Builder maxMeteredScopes(int scopes) {
      this.maxMeteredScopes =
          bound(
              scopes,
              "maxMeteredScopes",
              "distinct scopes with counters of their own; a scope names an operation, so count"
                  + " your operations");
      return this;
    }

    /** The clock for {@link Attempt#deadline()} and the backoff of {@link #waitWhileInProgress}. */
    public Builder clock(LeaseClock clock) {
      this.clock =
          required(clock, "clock(null): pass a LeaseClock, e.g. LeaseClock.system() (the default)");
      return this;
    }

    /**
     * @throws IllegalArgumentException when the retention is not longer than the lease
     */
    public IdempotencyConfig build() {
      if (retention.compareTo(lease) <= 0) {
        throw new IllegalArgumentException(
            "The retention ("
                + retention
                + ") must be longer than the lease ("
                + lease
                + "): a key purged while its attempt may still run would let a retry run it"
                + " again. Raise the retention.");
      }
      return new IdempotencyConfig(this);
    }

    private static int bound(int value, String setting, String what) {
      if (value < 1 || value > MAX_BOUND) {
        throw new IllegalArgumentException(
            String.format(
                "%s(%d) is out of range: pass 1 to %d (%s).", setting, value, MAX_BOUND, what));
      }
      return value;
    }

    private static <T> T required(T value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
      return value;
    }
  }
}
