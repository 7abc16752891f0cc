package dev.nolock.patterns;

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
   * Runs {@code work} on the connection {@code caller} uses now (its transaction, if any), with the
   * statements rendered by {@code renderWith}'s settings; commits nothing itself.
   */
  public static <T> T onCallerConnection(
      DSLContext caller, DSLContext renderWith, Function<DSLContext, T> work) {
    return caller.connectionResult(
        connection -> work.apply(renderWith.configuration().derive(connection).dsl()));
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
