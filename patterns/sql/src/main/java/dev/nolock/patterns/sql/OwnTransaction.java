package dev.nolock.patterns.sql;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * Runs statements on a connection of their own and makes them durable before returning: in
 * autocommit when the pool hands out autocommit connections (each statement commits by itself, in
 * its own round trip), else followed by an explicit {@code COMMIT}. Without that commit a pool
 * configured with {@code autoCommit=false} would roll a grant, a claim or a write back when the
 * connection is returned, after the caller was told it succeeded.
 *
 * <p>Autocommit is deliberate for single-statement writes: the row lock of an {@code UPDATE} is
 * released by the server as soon as the statement ends, instead of one more client round trip
 * later, which is what limits the rate of a hot row. Every nolock module that owns its statements
 * runs them through here.
 */
public final class OwnTransaction {

  private OwnTransaction() {}

  /**
   * Runs {@code statements} on one connection of {@code dsl}'s pool and commits them.
   *
   * @throws DataAccessException when the pool, a statement or the commit fails
   */
  public static <T> T run(DSLContext dsl, Function<DSLContext, T> statements) {
    return dsl.connectionResult(connection -> runOn(dsl, connection, statements));
  }

  /**
   * Runs {@code work} in the caller's open transaction: on the connection {@code caller} uses now,
   * with the statements rendered by {@code renderWith}'s settings. Commits nothing itself, so the
   * work commits, or rolls back, with the caller's own writes.
   *
   * <p>Refused ({@link IllegalArgumentException}, before any statement is sent): a {@code caller}
   * whose connection is in autocommit mode. Such a context is in no transaction (a {@code
   * DSL.using(pool)} outside {@code transaction(...)}, or a Spring transaction-aware context used
   * outside a transaction on an autocommit pool): every statement would commit by itself, apart
   * from the caller's writes, and a rollback of the caller would not undo it.
   *
   * <p>What cannot be detected, and is therefore the caller's to get right:
   *
   * <ol>
   *   <li>A context in no transaction on a pool with <b>autocommit off</b> (HikariCP's {@code
   *       autoCommit=false}, used outside {@code transaction(...)}). Its connection looks exactly
   *       like a transaction that has not sent a statement yet: JDBC has no "in a transaction"
   *       flag, and PostgreSQL begins the transaction with the first statement. The work runs, the
   *       call reports success, and the work is rolled back when the connection goes back to the
   *       pool (HikariCP rolls back a connection returned with uncommitted work), or lingers in the
   *       connection for its next user. Pass the context of {@code dsl.transaction(cfg -> ...
   *       cfg.dsl() ...)} or of your framework's transaction.
   *   <li>A caller's transaction that has already failed: PostgreSQL refuses the statements
   *       (SQLState {@code 25P02}, "current transaction is aborted"), which reaches the caller as a
   *       database failure, not as misuse.
   *   <li>A caller that rolls back afterwards: the work rolls back with it, by design.
   *   <li>A context on another database than the one the work belongs to: the work runs there.
   * </ol>
   *
   * @throws IllegalArgumentException when {@code caller}'s connection is in autocommit mode
   * @throws DataAccessException when the connection or a statement fails
   */
  public static <T> T onCallerConnection(
      DSLContext caller, DSLContext renderWith, Function<DSLContext, T> work) {
    return caller.connectionResult(
        connection -> {
          requireOpenTransaction(connection);
          return work.apply(renderWith.configuration().derive(connection).dsl());
        });
  }

  private static void requireOpenTransaction(Connection connection) throws SQLException {
    if (connection.getAutoCommit()) {
      throw new IllegalArgumentException(
          "The caller's context is in no transaction: its connection is in autocommit mode, so"
              + " these statements would commit one by one, apart from your own writes, and a"
              + " rollback would not undo them. Pass the context of an open transaction, e.g."
              + " dsl.transaction(cfg -> ... cfg.dsl() ...), or use the method without a context"
              + " to write in a transaction of its own.");
    }
  }

  private static <T> T runOn(
      DSLContext dsl, Connection connection, Function<DSLContext, T> statements) {
    DSLContext on = dsl.configuration().derive(connection).dsl();
    boolean autoCommit;
    try {
      autoCommit = connection.getAutoCommit();
    } catch (SQLException e) {
      throw new DataAccessException("Could not read the connection's autocommit mode", e);
    }
    if (autoCommit) {
      return statements.apply(on);
    }
    try {
      T result = statements.apply(on);
      connection.commit();
      return result;
    } catch (SQLException e) {
      rollbackQuietly(connection, e);
      throw new DataAccessException("Could not commit", e);
    } catch (RuntimeException e) {
      rollbackQuietly(connection, e);
      throw e;
    }
  }

  private static void rollbackQuietly(Connection connection, Exception cause) {
    try {
      connection.rollback();
    } catch (SQLException e) {
      cause.addSuppressed(e);
    }
  }
}
