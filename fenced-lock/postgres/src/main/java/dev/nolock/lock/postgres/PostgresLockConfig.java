package dev.nolock.lock.postgres;

import dev.nolock.patterns.sql.SqlNames;
import java.time.Duration;

/**
 * Immutable settings of a {@link PostgresLockBackend}, built with {@link #custom()}; each setter
 * validates at once.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE}, query timeout {@link #DEFAULT_QUERY_TIMEOUT}.
 */
public final class PostgresLockConfig {

  /** The lease table used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_locks";

  /** How long one lock statement may run before the driver cancels it. */
  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(5);

  /** Longest query timeout accepted: a lock statement is one indexed row; minutes mean trouble. */
  public static final Duration MAX_QUERY_TIMEOUT = Duration.ofMinutes(5);

  private final String table;
  private final Duration queryTimeout;

  private PostgresLockConfig(Builder builder) {
    this.table = builder.table;
    this.queryTimeout = builder.queryTimeout;
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

  /** The JDBC query timeout of each lock statement, whole seconds. */
  public Duration queryTimeout() {
    return queryTimeout;
  }

  @Override
  public String toString() {
    return "PostgresLockConfig[table=" + table + ", queryTimeout=" + queryTimeout + "]";
  }

  /** Builds a {@link PostgresLockConfig}. */
  public static final class Builder {
    private String table = DEFAULT_TABLE;
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;

    private Builder() {}

    /**
     * The lease table, optionally schema-qualified ({@code "app.nolock_locks"}): lower-case
     * letters, digits and underscores per part. Default {@value PostgresLockConfig#DEFAULT_TABLE}.
     *
     * @throws IllegalArgumentException for anything that is not a plain SQL identifier
     */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("lock table", table);
      this.table = table;
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
