package dev.nolock.patterns.sql;

import java.sql.SQLException;
import java.util.Set;
import org.postgresql.util.PSQLException;
import org.postgresql.util.ServerErrorMessage;

/**
 * Where the server says an error's primary message was written, read from pgjdbc's {@link
 * ServerErrorMessage}: PostgreSQL sends the source file and routine that raised every error.
 *
 * <p>This class names pgjdbc's types, and pgjdbc is an optional dependency of this module (every
 * user brings the driver they run; nolock does not choose its version for them). {@link SqlErrors}
 * loads it only after it has found pgjdbc on its own class path, so that a user without pgjdbc
 * never gets a {@link NoClassDefFoundError} from it.
 */
final class PgjdbcOrigin {

  /** The file of PL/pgSQL's executor. */
  private static final String PL_PGSQL = "pl_exec.c";

  /** PL/pgSQL's {@code RAISE} and {@code ASSERT}, whose message the function's author wrote. */
  private static final Set<String> WRITTEN_BY_THE_FUNCTION =
      Set.of("exec_stmt_raise", "exec_stmt_assert");

  private PgjdbcOrigin() {}

  /**
   * True when {@code failure} is pgjdbc's exception for an error whose primary message a PL/pgSQL
   * function wrote itself ({@code RAISE}, {@code ASSERT}), whatever SQLState it chose. False for
   * the server's own messages, for pgjdbc's own (no server message), and for another driver's
   * exception, whose origin this cannot tell.
   */
  static boolean writtenByUserCode(SQLException failure) {
    if (!(failure instanceof PSQLException psql)) {
      return false;
    }
    ServerErrorMessage server = psql.getServerErrorMessage();
    return server != null
        && PL_PGSQL.equals(server.getFile())
        && WRITTEN_BY_THE_FUNCTION.contains(server.getRoutine());
  }
}
