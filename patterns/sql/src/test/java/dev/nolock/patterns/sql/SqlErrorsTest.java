package dev.nolock.patterns.sql;

import static dev.nolock.patterns.sql.SqlErrors.Kind.OTHER;
import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import java.net.SocketException;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;

/** The shared policy: the states partitioned-ownership retried before it moved here. */
class SqlErrorsTest {

  @Test
  void backendFailuresAreTransient() {
    assertThat(SqlErrors.isTransient(wrapped("08006"))).as("connection failure").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("40001"))).as("serialization failure").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("40P01"))).as("deadlock").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("57014"))).as("statement timeout").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("57P01"))).as("admin shutdown").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("55P03"))).as("lock timeout").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("53300"))).as("too many connections").isTrue();
    assertThat(SqlErrors.isTransient(wrapped("25P03")))
        .as("session ended by idle_in_transaction_session_timeout")
        .isTrue();
    assertThat(SqlErrors.isTransient(wrapped("25P04")))
        .as("session ended by transaction_timeout")
        .isTrue();
    assertThat(
            SqlErrors.isTransient(
                new DataAccessException("pool", new SQLTransientConnectionException("timeout"))))
        .as("pool exhausted")
        .isTrue();
    assertThat(SqlErrors.isTransient(new RuntimeException(new SocketException("reset")))).isTrue();
  }

  @Test
  void errorsARetryWouldRepeatAreNot() {
    assertThat(SqlErrors.isTransient(wrapped("42P01"))).as("undefined table").isFalse();
    assertThat(SqlErrors.isTransient(wrapped("23505"))).as("unique violation").isFalse();
    assertThat(SqlErrors.isTransient(wrapped("42601"))).as("syntax error").isFalse();
    assertThat(SqlErrors.isTransient(wrapped("25P02"))).as("in failed transaction").isFalse();
    assertThat(SqlErrors.isTransient(new IllegalStateException("bug"))).isFalse();
  }

  /**
   * 25006 (read_only_sql_transaction): a write reached a server that cannot write, e.g. a pooled
   * connection to a primary demoted to a standby by a failover. The statement did not apply, and
   * the same call after a reconnect (to the new primary) succeeds. Other states of class 25 stay
   * what they were: a retry of the statement alone repeats them.
   */
  @Test
  void aWriteRefusedByAReadOnlyServerIsTransient() {
    assertThat(SqlErrors.classify(wrapped("25006"))).isEqualTo(SqlErrors.Kind.TRANSIENT);
    assertThat(SqlErrors.translate(wrapped("25006"), "renewing"))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("25006");
    assertThat(SqlErrors.classify(wrapped("25001"))).as("active transaction").isEqualTo(OTHER);
    assertThat(SqlErrors.classify(wrapped("25P02"))).as("in failed transaction").isEqualTo(OTHER);
  }

  private static DataAccessException wrapped(String sqlState) {
    return new DataAccessException("failed", new SQLException("failed", sqlState));
  }

  /** A handler that wraps a serialization failure in a state of its own is still retried. */
  @Test
  void aRetryableStateAnywhereInTheChainDecides() {
    SQLException wrapped =
        new SQLException(
            "handler failed", "HY000", new SQLException("could not serialize", "40001"));

    assertThat(SqlErrors.classify(wrapped)).isEqualTo(SqlErrors.Kind.TRANSIENT);
    assertThat(SqlErrors.classify(new SQLException("handler failed", "HY000")))
        .isEqualTo(SqlErrors.Kind.OTHER);
  }

  /**
   * A unique violation is a refusal some callers answer as a value (the key is taken): the
   * outermost SQLState decides, as for {@link SqlErrors#classify}.
   */
  @Test
  void aUniqueViolationIsToldApartFromOtherConstraintFailures() {
    assertThat(SqlErrors.isUniqueViolation(wrapped("23505"))).isTrue();
    assertThat(SqlErrors.isUniqueViolation(new RuntimeException(wrapped("23505")))).isTrue();
    assertThat(SqlErrors.isUniqueViolation(wrapped("23514"))).as("check violation").isFalse();
    assertThat(SqlErrors.isUniqueViolation(wrapped("08006"))).as("connection failure").isFalse();
    assertThat(
            SqlErrors.isUniqueViolation(
                new SQLException("trigger failed", "P0001", new SQLException("dup", "23505"))))
        .as("a unique violation inside another failure")
        .isFalse();
    assertThat(SqlErrors.isUniqueViolation(new IllegalStateException("bug"))).isFalse();
    assertThat(SqlErrors.isUniqueViolation(null)).isFalse();
  }
}
