package dev.nolock.ownership.internal;

import java.io.IOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;

/** Which database failures are worth retrying: the backend, not the statement, was at fault. */
public final class SqlErrors {

  private SqlErrors() {}

  /**
   * True for connection failures, timeouts and cancellations, serialization failures and deadlocks,
   * lock timeouts, lack of resources, administrator shutdowns, and a session the server ended
   * because its transaction sat idle or ran too long (an owner paused inside an apply past {@code
   * idle_in_transaction_session_timeout}: the transaction was rolled back); false for errors a
   * retry would repeat (a missing table, a constraint violation, a syntax error).
   */
  public static boolean isTransient(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof SQLTransientException
          || t instanceof SQLRecoverableException
          || t instanceof IOException) {
        return true;
      }
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        String state = sql.getSQLState();
        if (state.startsWith("08") // connection exception
            || state.startsWith("40") // serialization failure, deadlock
            || state.startsWith("53") // insufficient resources
            || state.startsWith("57") // canceled (statement timeout), admin shutdown
            || state.equals("55P03") // lock not available (lock_timeout)
            || state.equals("25P03") // idle_in_transaction_session_timeout ended the session
            || state.equals("25P04")) { // transaction_timeout (PostgreSQL 17) ended the session
          return true;
        }
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return false;
  }
}
