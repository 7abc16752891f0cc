package dev.nolock.patterns.sql;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Causes;
import dev.nolock.patterns.ErrorDescriber;
import java.io.IOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.function.Supplier;
import org.jooq.exception.DataAccessException;

/**
 * The one policy every nolock SQL module applies to a PostgreSQL failure, and the one check of how
 * many rows a single-row statement changed.
 *
 * <p>Guarantee: a failure is reported as retryable ({@link BackendUnavailableException}) only when
 * a retry can succeed without anyone changing anything: the connection, the server's resources or a
 * concurrent transaction was at fault, never the statement. A failure a retry would repeat (a
 * missing table, a missing privilege, a refused value, a state nolock does not know) is an {@link
 * IllegalStateException} or {@link IllegalArgumentException} that says what to fix. A statement
 * that changed more than one row where the key admits one is never reported as success.
 *
 * <p>Algorithm of {@link #classify}:
 *
 * <ol>
 *   <li>Walk the cause chain. A {@link SQLTransientException}, {@link SQLRecoverableException} or
 *       {@link IOException} anywhere in it: {@link Kind#TRANSIENT}.
 *   <li>Else the first SQLState found decides: class 08 (connection), 40 (serialization failure,
 *       deadlock), 53 (insufficient resources), 57 (cancelled by a statement timeout, server
 *       shutdown), {@code 55P03} (lock timeout), {@code 25P03} and {@code 25P04} (the server ended
 *       an idle or overlong transaction), {@code 25006} (a write on a read-only server: a pooled
 *       connection to a primary that a failover demoted to a standby): {@link Kind#TRANSIENT};
 *       class 42 and {@code 3F000} (no such table, column or schema; no privilege): {@link
 *       Kind#SCHEMA}; classes 22 and 23 (a value or constraint the data broke): {@link Kind#DATA}.
 *   <li>Anything else, or no SQLState: {@link Kind#OTHER}, which a retry would repeat.
 * </ol>
 *
 * <p>Only these states of class 25 (invalid transaction state) are transient; the others ({@code
 * 25P02}, in a failed transaction; {@code 25001}, a transaction already active) say the caller's
 * transaction is misused, which a retry repeats. {@code 25006} is refused before anything is
 * written, and the transaction it aborts cannot commit, so its outcome is known: nothing applied.
 * It is transient because the same call succeeds once the pool reconnects to the new primary. A
 * database made read-only on purpose ({@code default_transaction_read_only}) looks the same, and a
 * caller that retries forever (partitioned-ownership's runner) then waits until it is writable.
 */
public final class SqlErrors {

  /** What kind of fault a failure is, which decides what the caller must do. */
  public enum Kind {
    /**
     * The connection, the server's resources, a concurrent transaction or a server that cannot
     * write yet (failover): retry later.
     */
    TRANSIENT,
    /** The table, a column, the schema or a privilege does not match: fix the schema. */
    SCHEMA,
    /** A value or a constraint was refused: fix the value or the table's constraints. */
    DATA,
    /** Any other failure: a retry would repeat it (a bug, a damaged or unsupported database). */
    OTHER
  }

  /**
   * Whether nolock's class loader sees pgjdbc, so that {@link PgjdbcOrigin}, which names its types,
   * can load. pgjdbc is an optional dependency here: every nolock SQL module runs on the driver the
   * user brings, which for PostgreSQL is pgjdbc, but forcing it (and its version) on them would
   * take that choice away; a user without it keeps every rule but the one that needs the server's
   * file and routine.
   */
  private static final boolean PGJDBC = pgjdbcVisible();

  /** The severities pgjdbc puts before the server's primary message. */
  private static final String[] SEVERITIES = {"ERROR: ", "FATAL: ", "PANIC: "};

  private SqlErrors() {}

  /** The kind of {@code failure}; see the class Javadoc for the rule. */
  public static Kind classify(Throwable failure) {
    String state = null;
    for (Throwable t : Causes.of(failure)) {
      if (t instanceof SQLTransientException
          || t instanceof SQLRecoverableException
          || t instanceof IOException) {
        return Kind.TRANSIENT;
      }
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        // A retryable state anywhere in the chain decides (a handler may wrap a serialization
        // failure in an exception of its own); otherwise the outermost state does.
        if (classify(sql.getSQLState()) == Kind.TRANSIENT) {
          return Kind.TRANSIENT;
        }
        if (state == null) {
          state = sql.getSQLState();
        }
      }
    }
    if (state == null && failure instanceof DataAccessException dae) {
      state = dae.sqlState();
    }
    return classify(state);
  }

  /** The kind of a failure with this SQLState; null or unknown is {@link Kind#OTHER}. */
  public static Kind classify(String sqlState) {
    if (sqlState == null) {
      return Kind.OTHER;
    }
    if (sqlState.startsWith("08") // connection exception
        || sqlState.startsWith("40") // serialization failure, deadlock
        || sqlState.startsWith("53") // insufficient resources
        || sqlState.startsWith("57") // canceled (statement timeout), admin shutdown
        || sqlState.equals("55P03") // lock not available (lock_timeout)
        || sqlState.equals("25P03") // idle_in_transaction_session_timeout ended the session
        || sqlState.equals("25P04") // transaction_timeout (PostgreSQL 17) ended the session
        || sqlState.equals("25006")) { // read_only_sql_transaction: a demoted primary refused it
      return Kind.TRANSIENT;
    }
    if (sqlState.startsWith("42") || sqlState.equals("3F000")) {
      return Kind.SCHEMA;
    }
    if (sqlState.startsWith("22") || sqlState.startsWith("23")) {
      return Kind.DATA;
    }
    return Kind.OTHER;
  }

  /** PostgreSQL's SQLState for a unique violation: a row with the same unique key exists. */
  public static final String UNIQUE_VIOLATION = "23505";

  /**
   * True when {@code failure} is a unique violation ({@value #UNIQUE_VIOLATION}), which a caller
   * may answer as a refusal (the key is taken) rather than as a failure. The outermost SQLState in
   * the cause chain decides, as for {@link #classify}: a violation inside another failure (a
   * trigger that raised its own error) is that other failure.
   */
  public static boolean isUniqueViolation(Throwable failure) {
    for (Throwable t : Causes.of(failure)) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return UNIQUE_VIOLATION.equals(sql.getSQLState());
      }
    }
    return false;
  }

  /**
   * True when a retry of the same call can succeed: {@link #classify} says {@link Kind#TRANSIENT}.
   */
  public static boolean isTransient(Throwable failure) {
    return classify(failure) == Kind.TRANSIENT;
  }

  /**
   * Runs {@code statement}, turning a jOOQ failure into {@link #translate}'s exception.
   *
   * @param doing what the call was doing and, for a write, what its outcome is after a lost answer
   *     (e.g. {@code "renewing lock \"a\". Treat the lease as ending at its deadline"}); built only
   *     on failure
   */
  public static <T> T run(Supplier<String> doing, Supplier<T> statement) {
    try {
      return statement.get();
    } catch (DataAccessException e) {
      throw translate(e, doing.get());
    }
  }

  /**
   * The exception to throw for {@code e}:
   *
   * <ol>
   *   <li>{@link Kind#TRANSIENT}: {@link BackendUnavailableException} "PostgreSQL failed while
   *       {@code doing}", so the caller's own advice on the unknown outcome reaches the user.
   *   <li>{@link Kind#SCHEMA}: {@link IllegalStateException}: the table does not match or a
   *       privilege is missing.
   *   <li>{@link Kind#DATA}: {@link IllegalArgumentException}: the value was refused.
   *   <li>{@link Kind#OTHER}: {@link IllegalStateException}: a retry would repeat it.
   * </ol>
   *
   * Every message carries the SQLState and {@link #serverMessage}: the server's primary message,
   * never the row's values (its DETAIL, the statement's bound values); {@code e} is the cause and
   * keeps all of it.
   */
  public static RuntimeException translate(DataAccessException e, String doing) {
    String sqlState = sqlState(e);
    String state = sqlState == null ? "" : " (SQLSTATE " + sqlState + ")";
    String cause = serverMessage(e) + state;
    return switch (classify(e)) {
      case TRANSIENT ->
          new BackendUnavailableException(
              "PostgreSQL failed while " + doing + ". Cause: " + cause, e);
      case SCHEMA ->
          new IllegalStateException(
              "PostgreSQL refused the statement while "
                  + doing
                  + ": "
                  + cause
                  + ". Retrying will not help: the table does not match the one nolock creates"
                  + " (createTableIfMissing), or the database user lacks a privilege on it.",
              e);
      case DATA ->
          new IllegalArgumentException(
              "PostgreSQL refused the data while "
                  + doing
                  + ": "
                  + cause
                  + ". Retrying will not help: fix the value or the table's constraints.",
              e);
      case OTHER ->
          new IllegalStateException(
              "PostgreSQL failed while "
                  + doing
                  + ": "
                  + cause
                  + ". This is not a connection, timeout or concurrency failure, so a retry would"
                  + " likely repeat it (a bug, or a damaged or unsupported database); if it came"
                  + " at a commit, whether the writes committed is unknown.",
              e);
    };
  }

  /**
   * Reads the row count of a statement that matches one row by a unique key: 0 is {@code false}, 1
   * is {@code true}, and more is a damaged schema, never a success.
   *
   * @param what the statement, e.g. {@code "renewal of lock \"a\""}
   * @param table the table, for the message
   * @param uniqueKey the columns that must be unique, e.g. {@code "(name)"}
   * @throws IllegalStateException when {@code rows > 1}
   */
  public static boolean atMostOneRow(int rows, String what, Object table, String uniqueKey) {
    if (rows > 1) {
      throw new IllegalStateException(
          "The "
              + what
              + " changed "
              + rows
              + " rows where at most one can match: the table "
              + table
              + " has lost its primary key on "
              + uniqueKey
              + ". This is a damaged schema or a bug; recreate the table with"
              + " createTableIfMissing on an empty schema. If the statement ran in autocommit,"
              + " its change is committed already.");
    }
    return rows == 1;
  }

  /**
   * The server's primary message ("relation ... does not exist", "duplicate key value violates
   * unique constraint ..."), and nothing that can carry the row's values: what a message may quote
   * is left to the cause, which keeps all of it.
   *
   * <ul>
   *   <li>From the driver's exception of the failure's SQLState (pgjdbc's own for a batch, not the
   *       {@link java.sql.BatchUpdateException} whose message inlines the bound values), its first
   *       line without the severity: never the {@code Detail:} that follows ({@code Failing row
   *       contains (...)}, {@code Key (...)=(...) already exists}), the hint, the position or the
   *       statement.
   *   <li>For SQLState class 22 (data exception) and class P0 (raised by PL/pgSQL, e.g. a trigger's
   *       {@code RAISE}), no text of the server's, which quotes the refused input ({@code invalid
   *       input syntax for type integer: "..."}) or whatever the function put in it: a note that it
   *       is in the cause.
   *   <li>The same for a message a PL/pgSQL function wrote itself under any other SQLState ({@code
   *       RAISE EXCEPTION 'card %', NEW.card USING ERRCODE = '23514'}): the server sends the file
   *       and routine of every error, and one from PL/pgSQL's {@code RAISE} or {@code ASSERT}
   *       ({@code pl_exec.c}'s {@code exec_stmt_raise}, {@code exec_stmt_assert}) is user code.
   *       This needs pgjdbc's exception; another driver's keeps its first line.
   *   <li>Without a driver exception (a failure of jOOQ's own, such as a conversion, whose message
   *       can quote a value): the class names of the failure and its causes.
   * </ul>
   */
  public static String serverMessage(DataAccessException e) {
    return serverMessage((Throwable) e);
  }

  /** {@link #serverMessage(DataAccessException)} of any failure, e.g. a driver's. */
  public static String serverMessage(Throwable failure) {
    SQLException server = serverException(failure);
    if (server == null) {
      return ErrorDescriber.classNames().describe(failure);
    }
    String state = server.getSQLState();
    if (state != null && state.startsWith("22")) {
      return "the server refused a value (its message, which can quote the value, is in the cause)";
    }
    if ((state != null && state.startsWith("P0"))
        || (PGJDBC && PgjdbcOrigin.writtenByUserCode(server))) {
      return "raised by a PL/pgSQL function such as a trigger (its message, which can quote the"
          + " row, is in the cause)";
    }
    String message = server.getMessage();
    if (message == null || message.isBlank()) {
      return server.getClass().getName();
    }
    int newline = message.indexOf('\n');
    String line = (newline < 0 ? message : message.substring(0, newline)).strip();
    for (String severity : SEVERITIES) {
      if (line.startsWith(severity)) {
        return line.substring(severity.length());
      }
    }
    return line;
  }

  private static boolean pgjdbcVisible() {
    try {
      Class.forName("org.postgresql.util.PSQLException", false, SqlErrors.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError absent) {
      return false;
    }
  }

  /**
   * The SQLState {@link #classify} decides by (the outermost in the cause chain), or jOOQ's own
   * when it has one; null when there is none. jOOQ answers {@code 00000} ("successful completion")
   * for a failure without a driver exception, which is no state.
   */
  private static String sqlState(DataAccessException e) {
    SQLException server = serverException(e);
    if (server != null) {
      return server.getSQLState();
    }
    String state = e.sqlState();
    return state == null || state.equals("00000") ? null : state;
  }

  /**
   * The innermost {@link SQLException} carrying the outermost SQLState of the chain: for a batch,
   * pgjdbc's exception for the statement rather than the {@link java.sql.BatchUpdateException}
   * around it. Without any SQLState, the innermost {@link SQLException}; null when there is none.
   */
  private static SQLException serverException(Throwable failure) {
    String state = null;
    SQLException found = null;
    SQLException anyFound = null;
    for (Throwable t : Causes.of(failure)) {
      if (t instanceof SQLException sql) {
        anyFound = sql;
        if (sql.getSQLState() != null) {
          if (state == null) {
            state = sql.getSQLState();
          }
          if (state.equals(sql.getSQLState())) {
            found = sql;
          }
        }
      }
    }
    return found != null ? found : anyFound;
  }
}
