package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PostgresExtension.class)
/** {@link JdbcFaults} models the faults it names against the real PostgreSQL. */
class JdbcFaultsIT {

  private final PostgresSchema schema;

  JdbcFaultsIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) throws SQLException {
    try (Connection connection = schema.dataSource().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE TABLE IF NOT EXISTS ledger (note text NOT NULL)");
    }
  }

  @Test
  void aStatementWhoseAnswerIsLostIsDurableInAutocommitAndTheCallFails() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault =
          faults.onNextStatement(FaultKind.ANSWER_LOST, JdbcFaults.sqlContaining("insert"));

      assertThatThrownBy(() -> insert(faults.dsl(), "answer-lost"))
          .isInstanceOf(DataAccessException.class)
          .hasRootCauseInstanceOf(SQLException.class)
          .rootCause()
          .hasFieldOrPropertyWithValue("SQLState", JdbcFaults.CONNECTION_FAILURE);

      fault.assertFired();
      assertThat(count("answer-lost")).isEqualTo(1);
      insert(faults.dsl(), "after");
      assertThat(count("after")).as("the pool replaced the broken connection").isEqualTo(1);
    }
  }

  @Test
  void aStatementLostOnTheWayNeverReachesTheServer() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault =
          faults.onNextStatement(FaultKind.REQUEST_LOST, JdbcFaults.sqlContaining("insert"));

      assertThatThrownBy(() -> insert(faults.dsl(), "request-lost"))
          .isInstanceOf(DataAccessException.class);

      fault.assertFired();
      assertThat(count("request-lost")).isZero();
    }
  }

  @Test
  void aCommitWhoseAnswerIsLostCommitted() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);

      assertThatThrownBy(
              () -> faults.dsl().transaction(tx -> insert(tx.dsl(), "commit-answer-lost")))
          .isInstanceOf(DataAccessException.class);

      fault.assertFired();
      assertThat(count("commit-answer-lost")).isEqualTo(1);
    }
  }

  @Test
  void aCommitLostOnTheWayRollsBack() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.REQUEST_LOST);

      assertThatThrownBy(
              () -> faults.dsl().transaction(tx -> insert(tx.dsl(), "commit-request-lost")))
          .isInstanceOf(DataAccessException.class);

      fault.assertFired();
      assertThat(count("commit-request-lost")).isZero();
    }
  }

  @Test
  void aFaultThatNeverFiredFailsItsAssertion() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault =
          faults.onNextStatement(FaultKind.ANSWER_LOST, JdbcFaults.sqlContaining("delete"));
      insert(faults.dsl(), "no-delete");

      assertThatThrownBy(fault::assertFired)
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("never fired");
    }
  }

  private void insert(DSLContext dsl, String note) {
    dsl.insertInto(DSL.table(DSL.name("ledger")), DSL.field(DSL.name("note"))).values(note)
        .execute();
  }

  private int count(String note) {
    return schema
        .dsl()
        .fetchCount(DSL.table(DSL.name("ledger")), DSL.field(DSL.name("note")).eq(note));
  }
}
