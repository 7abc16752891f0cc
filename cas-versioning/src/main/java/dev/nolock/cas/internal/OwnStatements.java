package dev.nolock.cas.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * Runs a few statements on one connection of a pool and makes them durable before returning: in
 * autocommit when the pool hands out autocommit connections (each statement commits by itself, in
 * the same round trip), else followed by an explicit {@code COMMIT}. Without that commit a pool
 * configured with {@code autoCommit=false} would roll the write back when the connection is
 * returned, after the caller was told it had succeeded.
 *
 * <p>Autocommit is deliberate for single-row writes: the row lock of an {@code UPDATE} is then
 * released by the server as soon as the statement ends, instead of one more client round trip
 * later, which is what limits the rate of a hot row.
 */
public final class OwnStatements {

  private OwnStatements() {}

  /**
   * Runs {@code statements} on one connection of {@code dsl}'s pool and commits them.
   *
   * @throws DataAccessException when the pool, a statement or the commit fails
   */
  public static <T> T run(DSLContext dsl, Function<DSLContext, T> statements) {
    return dsl.connectionResult(connection -> runOn(dsl, connection, statements));
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
      throw new DataAccessException("Could not commit the write", e);
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
