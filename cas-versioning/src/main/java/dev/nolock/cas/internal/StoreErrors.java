package dev.nolock.cas.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.SqlErrors.Kind;
import org.jooq.exception.DataAccessException;

/**
 * Turns jOOQ's {@link DataAccessException} into what the caller must do, by the shared policy of
 * {@link SqlErrors} (which SQLStates a retry can fix): fix the table or the configuration ({@link
 * IllegalStateException}), fix the value ({@link IllegalArgumentException}), or retry later ({@link
 * BackendUnavailableException}, only for a failure the shared policy calls transient). What this
 * class adds is the store's own advice: the DDL that fits the configured table, and what a lost
 * answer means for what the call had sent.
 */
public final class StoreErrors {

  private static final String UNDEFINED_TABLE = "42P01";
  private static final String INVALID_SCHEMA_NAME = "3F000";
  private static final String UNDEFINED_COLUMN = "42703";
  private static final String NO_UNIQUE_KEY_FOR_ON_CONFLICT = "42P10";
  private static final String SERIALIZATION_FAILURE = "40001";
  private static final String DEADLOCK_DETECTED = "40P01";
  private static final String IDLE_IN_TRANSACTION_SESSION_TIMEOUT = "25P03";

  private StoreErrors() {}

  /**
   * What a call had sent when PostgreSQL or the connection failed, which decides what the caller is
   * told: after a lost answer (a dropped connection, a timeout) a write may have been applied, and
   * only a read of the row can tell.
   */
  public enum Sent {
    /** Reads only: nothing was written. */
    READ("Nothing was written by this call; retry later with backoff."),
    /** One conditional write of one row (insert, compare-and-set, delete). */
    WRITE(
        "The outcome is unknown: PostgreSQL may have applied the write before the failure. Read"
            + " the key back before you write it again; sent again, a write that did land comes"
            + " back as a conflict (the key exists, or is no longer at the version you sent)."),
    /** The compare-and-set of an {@code update}. */
    UPDATE(
        "The outcome is unknown: PostgreSQL may have applied the change before the failure, once."
            + " Read the key back before you call update again: a second call applies the change"
            + " again on top of the first if that one landed."),
    /** A transaction of the store's own that failed before its COMMIT was sent. */
    UNCOMMITTED(
        "Nothing was written by this call: its transaction failed before the COMMIT was sent, and"
            + " PostgreSQL rolls back a transaction that does not commit. Retry later with"
            + " backoff."),
    /** The transaction of a batch compare-and-set. */
    BATCH(
        "The outcome is unknown: if the failure hit the COMMIT, PostgreSQL may have committed the"
            + " whole batch. Read the rows back; sent again, the rows that did land come back as"
            + " conflicts."),
    /** Anything inside the caller's transaction ({@code inTransaction}). */
    CALLERS_TRANSACTION(
        "Nothing of this call is committed: it is part of your transaction, which cannot commit"
            + " if the connection was lost (PostgreSQL then rolls it back). Roll it back and run"
            + " the whole transaction again.");

    private final String advice;

    Sent(String advice) {
      this.advice = advice;
    }
  }

  /**
   * True for SQLSTATE 40001: a statement under REPEATABLE READ or SERIALIZABLE found its row
   * changed by a transaction that committed after its snapshot. The transaction is aborted.
   */
  public static boolean isSerializationFailure(DataAccessException e) {
    return SERIALIZATION_FAILURE.equals(e.sqlState());
  }

  /**
   * True for SQLSTATE 25P03: PostgreSQL ended the session because its transaction sat idle longer
   * than {@code idle_in_transaction_session_timeout}. The transaction is rolled back: the server
   * checks for the pending timeout before it executes a next command, so a {@code COMMIT} that
   * reached it after that point never ran.
   */
  public static boolean isIdleSessionEnded(DataAccessException e) {
    return IDLE_IN_TRANSACTION_SESSION_TIMEOUT.equals(e.sqlState());
  }

  /**
   * The exception to throw for {@code e}.
   *
   * @param doing what the store was doing, e.g. {@code "compare-and-set of key 42"}
   * @param sent what the call had sent, for a failure that leaves its outcome unknown
   */
  public static RuntimeException translate(
      DataAccessException e, VersionTable<?, ?, ?> table, String doing, Sent sent) {
    String state = e.sqlState() == null ? "" : e.sqlState();
    Kind kind = SqlErrors.classify(e);
    String cause = SqlErrors.serverMessage(e);
    String where = " on table " + table.tableName() + " during the " + doing;
    if (state.equals(UNDEFINED_TABLE) || state.equals(INVALID_SCHEMA_NAME)) {
      return new IllegalStateException(
          "The table "
              + table.tableName()
              + " does not exist (PostgreSQL: "
              + cause
              + "). Create"
              + " it, e.g. "
              + table.createTableSql()
              + ", or configure the store with the name of"
              + " your table. The key column must be unique.",
          e);
    }
    if (state.equals(UNDEFINED_COLUMN)) {
      return new IllegalStateException(
          "The table "
              + table.tableName()
              + " lacks a configured column ("
              + table.describeColumns()
              + "; PostgreSQL: "
              + cause
              + "). Add it, e.g. "
              + table.addVersionColumnSql()
              + ", or configure the column names of your table.",
          e);
    }
    if (state.equals(NO_UNIQUE_KEY_FOR_ON_CONFLICT)) {
      return new IllegalStateException(
          "The table "
              + table.tableName()
              + " has no unique key on the key column alone, which"
              + " insert (ON CONFLICT) and every compare-and-set rely on (PostgreSQL: "
              + cause
              + "). Add a primary key or a unique index on it, e.g. "
              + table.createTableSql()
              + ".",
          e);
    }
    if (kind == Kind.SCHEMA) {
      return new IllegalStateException(
          "PostgreSQL refused the statement"
              + where
              + ": "
              + cause
              + " (SQLSTATE "
              + state
              + "). The table does not match the configuration (the key type and the value"
              + " codec's stored type must match the column types, the version column is bigint)"
              + " or the database user lacks a privilege. Expected shape: "
              + table.createTableSql()
              + ".",
          e);
    }
    if (kind == Kind.DATA) {
      return new IllegalArgumentException(
          "PostgreSQL refused the data"
              + where
              + ": "
              + cause
              + " (SQLSTATE "
              + state
              + "). Retrying will not help: fix the value (or its codec), or your table's"
              + " constraints; the store writes only the key, version and value columns, so"
              + " other NOT NULL columns need defaults.",
          e);
    }
    if (state.equals(SERIALIZATION_FAILURE) || state.equals(DEADLOCK_DETECTED)) {
      return new BackendUnavailableException(
          "PostgreSQL aborted the transaction"
              + where
              + " (SQLSTATE "
              + state
              + ": "
              + cause
              + "). Nothing of that transaction is committed: roll it back if it is yours, and"
              + " run it again. Under REPEATABLE READ or SERIALIZABLE a concurrent change of the"
              + " same row ends this way instead of as a conflict value.",
          e);
    }
    if (kind == Kind.OTHER) {
      return new IllegalStateException(
          "PostgreSQL failed"
              + where
              + ": "
              + cause
              + (state.isEmpty() ? "" : " (SQLSTATE " + state + ")")
              + ". This is not a connection, timeout or concurrency failure, so a retry would"
              + " repeat it: a bug, or a damaged or unsupported database. "
              + sent.advice,
          e);
    }
    return new BackendUnavailableException(
        "PostgreSQL failed"
            + where
            + ": "
            + cause
            + (state.isEmpty() ? "" : " (SQLSTATE " + state + ")")
            + ". "
            + sent.advice,
        e);
  }
}
