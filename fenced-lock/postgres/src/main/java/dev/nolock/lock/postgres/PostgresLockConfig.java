package dev.nolock.lock.postgres;

import dev.nolock.patterns.sql.SqlNames;
import java.time.Duration;

/**
 * Immutable settings of a {@link PostgresLockBackend}, built with {@link #custom()}; each setter
 * validates at once.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE} (its waiters' queue {@value #DEFAULT_TABLE}{@value
 * #WAITERS_SUFFIX}), query timeout {@link #DEFAULT_QUERY_TIMEOUT}, listening for releases on.
 */
public final class PostgresLockConfig {

  /** The lease table used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_locks";

  /** What the queue of waiters' table adds to the lease table's name. */
  public static final String WAITERS_SUFFIX = "_waiters";

  /**
   * The channel releases are announced on (a notification names the first waiter; its payload's
   * format is internal).
   */
  public static final String CHANNEL = "nolock_lock_release";

  /** How long one lock statement may run before the driver cancels it. */
  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(5);

  /** Longest query timeout accepted: a lock statement is one indexed row; minutes mean trouble. */
  public static final Duration MAX_QUERY_TIMEOUT = Duration.ofMinutes(5);

  private final String table;
  private final Duration queryTimeout;
  private final boolean listen;

  private PostgresLockConfig(Builder builder) {
    this.table = builder.table;
    this.queryTimeout = builder.queryTimeout;
    this.listen = builder.listen;
  }

  /** Every default. */
  public static PostgresLockConfig ofDefaults() {
    return custom().build();
  }

  /** A builder starting from the defaults. */
  public static Builder custom() {
    return new Builder();
  }

  /** The lease table, {@code table} or {@code schema.table}. */
  public String table() {
    return table;
  }

  /** The queue of waiters' table: the lease table's name plus {@value #WAITERS_SUFFIX}. */
  public String waitersTable() {
    return table + WAITERS_SUFFIX;
  }

  /** Whether a waiting acquire is woken by {@code LISTEN}/{@code NOTIFY} when a lease is freed. */
  public boolean listen() {
    return listen;
  }

  /** The JDBC query timeout of each lock statement, whole seconds. */
  public Duration queryTimeout() {
    return queryTimeout;
  }

  @Override
  public String toString() {
    return "PostgresLockConfig[table="
        + table
        + ", queryTimeout="
        + queryTimeout
        + ", listen="
        + listen
        + "]";
  }

  /** Builds a {@link PostgresLockConfig}. */
  public static final class Builder {
    private String table = DEFAULT_TABLE;
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;
    private boolean listen = true;

    private Builder() {}

    /**
     * The lease table, optionally schema-qualified ({@code "app.nolock_locks"}): lower-case
     * letters, digits and underscores per part, the last part short enough that it still is one
     * with {@value PostgresLockConfig#WAITERS_SUFFIX} added (the queue of waiters' table beside
     * it). Default {@value PostgresLockConfig#DEFAULT_TABLE}.
     *
     * @throws IllegalArgumentException for anything that is not a plain SQL identifier
     */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("lock table", table);
      SqlNames.requireSqlIdentifier(
          "lock table's queue of waiters (the lock table's name plus \""
              + WAITERS_SUFFIX
              + "\"; shorten the lock table's name)",
          table + WAITERS_SUFFIX);
      this.table = table;
      return this;
    }

    /**
     * Whether a caller waiting in {@code FencedLock.acquire} is woken by {@code LISTEN}/{@code
     * NOTIFY} when a lease it waits for is freed, instead of at its next poll. On (the default),
     * the backend keeps one connection of its pool listening from the first acquire that has to
     * wait until nobody has waited for 10 s (or {@link PostgresLockBackend#close()}); it tests the
     * LISTEN once with a notification to itself and stops listening, with a warning, where that
     * never arrives (PgBouncer in transaction pooling, where this should be off), trying again a
     * minute later, then after 2, 4, ... up to 64 minutes. Whenever waiters cannot be woken, they
     * poll with the lock's backoff without a place in the queue, as before the queue existed.
     */
    public Builder listen(boolean listen) {
      this.listen = listen;
      return this;
    }

    /**
     * How long one statement may run before pgjdbc cancels it (it then fails with {@link
     * dev.nolock.patterns.BackendUnavailableException}); whole seconds, from 1 s to {@link
     * #MAX_QUERY_TIMEOUT}. It bounds waits on the server (a row lock, an overloaded server), not a
     * dead network: set pgjdbc's {@code socketTimeout} for that. Default 5 s.
     */
    public Builder queryTimeout(Duration queryTimeout) {
      present(queryTimeout, "queryTimeout");
      if (queryTimeout.compareTo(Duration.ofSeconds(1)) < 0
          || queryTimeout.compareTo(MAX_QUERY_TIMEOUT) > 0
          || queryTimeout.toNanos() % 1_000_000_000L != 0) {
        throw new IllegalArgumentException(
            "The query timeout must be whole seconds between 1 s and "
                + MAX_QUERY_TIMEOUT
                + " (JDBC counts it in seconds), got "
                + queryTimeout
                + ": use e.g."
                + " Duration.ofSeconds(5).");
      }
      this.queryTimeout = queryTimeout;
      return this;
    }

    public PostgresLockConfig build() {
      return new PostgresLockConfig(this);
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
