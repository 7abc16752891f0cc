package dev.nolock.patterns.sql;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Savepoint;
import java.util.ArrayDeque;
import java.util.Deque;
import org.jooq.TransactionContext;
import org.jooq.TransactionProvider;
import org.jooq.exception.DataAccessException;

/**
 * A jOOQ transaction provider for a transaction the caller owns: every transaction jOOQ begins is a
 * savepoint, committed by releasing it and rolled back to it; the caller's transaction itself is
 * never committed nor rolled back. Hand-written because jOOQ's own provider makes the outermost
 * transaction a real one, committed on the connection. A failure's message carries the server's
 * primary message only ({@link SqlErrors#serverMessage(Throwable)}); the driver's exception is its
 * cause.
 */
final class SavepointsOnly implements TransactionProvider {
  private final Connection connection;
  private final Deque<Savepoint> savepoints = new ArrayDeque<>();

  SavepointsOnly(Connection connection) {
    this.connection = connection;
  }

  @Override
  public void begin(TransactionContext context) {
    try {
      savepoints.push(connection.setSavepoint());
    } catch (SQLException e) {
      throw new DataAccessException(
          "Could not set a savepoint in the caller's transaction: " + SqlErrors.serverMessage(e),
          e);
    }
  }

  @Override
  public void commit(TransactionContext context) {
    try {
      connection.releaseSavepoint(savepoints.pop());
    } catch (SQLException e) {
      throw new DataAccessException(
          "Could not release the savepoint in the caller's transaction: "
              + SqlErrors.serverMessage(e),
          e);
    }
  }

  @Override
  public void rollback(TransactionContext context) {
    try {
      connection.rollback(savepoints.pop());
    } catch (SQLException e) {
      throw new DataAccessException(
          "Could not roll back to the savepoint in the caller's transaction: "
              + SqlErrors.serverMessage(e),
          e);
    }
  }
}
