package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
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
  void aFaultsMeanwhileActionRunsAfterTheServerAppliedAndBeforeTheCallerHears() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      AtomicInteger seenMeanwhile = new AtomicInteger(-1);
      AtomicBoolean callerHeard = new AtomicBoolean();
      InjectedFault fault =
          faults.onNextStatement(
              FaultKind.ANSWER_LOST,
              JdbcFaults.sqlContaining("insert"),
              () -> {
                assertThat(callerHeard).as("the caller has not heard yet").isFalse();
                seenMeanwhile.set(count("meanwhile"));
                insert(schema.dsl(), "meanwhile-other");
              });

      Throwable thrown = catchThrowable(() -> insert(faults.dsl(), "meanwhile"));
      callerHeard.set(true);

      fault.assertFired();
      assertThat(thrown).isInstanceOf(DataAccessException.class);
      assertThat(seenMeanwhile).as("the statement was applied before the action").hasValue(1);
      assertThat(count("meanwhile-other")).isEqualTo(1);
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
  void aTransactionEndFaultLandsOnTheRollbackOfATransactionThatRollsBack() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextTransactionEnd(FaultKind.ANSWER_LOST);

      assertThatThrownBy(
              () ->
                  faults
                      .dsl()
                      .transaction(
                          tx -> {
                            insert(tx.dsl(), "rolled-back");
                            throw new IllegalStateException("found nothing to update");
                          }))
          .isInstanceOf(IllegalStateException.class)
          .hasMessage("found nothing to update");

      fault.assertFired();
      assertThat(fault.toString()).contains("COMMIT or ROLLBACK");
      assertThat(count("rolled-back")).isZero();
    }
  }

  @Test
  void aTransactionEndFaultLandsOnTheCommitOfATransactionThatCommits() {
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextTransactionEnd(FaultKind.ANSWER_LOST);

      assertThatThrownBy(() -> faults.dsl().transaction(tx -> insert(tx.dsl(), "end-committed")))
          .isInstanceOf(DataAccessException.class);

      fault.assertFired();
      assertThat(count("end-committed")).isEqualTo(1);
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
    dsl.insertInto(DSL.table(DSL.name("ledger")), DSL.field(DSL.name("note")))
        .values(note)
        .execute();
  }

  private int count(String note) {
    return schema
        .dsl()
        .fetchCount(DSL.table(DSL.name("ledger")), DSL.field(DSL.name("note")).eq(note));
  }
}
