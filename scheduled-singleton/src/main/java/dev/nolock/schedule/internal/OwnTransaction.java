package dev.nolock.schedule.internal;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * Runs one statement on a connection of its own and makes it durable before returning: in
 * autocommit when the pool hands out autocommit connections (one round trip), else followed by an
 * explicit {@code COMMIT}. Without the commit a pool configured with {@code autoCommit=false} would
 * roll a claim back when the connection is returned, after the scheduler had started the job.
 */
public final class OwnTransaction {

  private OwnTransaction() {}

  /**
   * Runs {@code statement} on one connection of {@code dsl}'s pool and commits it.
   *
   * @throws DataAccessException when the pool, the statement or the commit fails
   */
  public static <T> T run(DSLContext dsl, Function<DSLContext, T> statement) {
    return dsl.connectionResult(connection -> runOn(dsl, connection, statement));
  }

  private static <T> T runOn(
      DSLContext dsl, Connection connection, Function<DSLContext, T> statement) {
    DSLContext on = dsl.configuration().derive(connection).dsl();
    boolean autoCommit;
    try {
      autoCommit = connection.getAutoCommit();
    } catch (SQLException e) {
      throw new DataAccessException("Could not read the connection's autocommit mode", e);
    }
    if (autoCommit) {
      return statement.apply(on);
    }
    try {
      T result = statement.apply(on);
      connection.commit();
      return result;
    } catch (SQLException e) {
      rollbackQuietly(connection, e);
      throw new DataAccessException("Could not commit the scheduler's statement", e);
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
