package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The store's statements when PostgreSQL applied them (or never saw them) and the answer was lost
 * with the connection ({@link JdbcFaults}): every call reports {@link BackendUnavailableException}
 * ("outcome unknown"), never a false conflict or success, and a re-read finds exactly one effect. A
 * caller's retry after "unknown" may then get a conflict. The single-row cases, with and without
 * another writer in between, are testkit's {@code VersionedStoreLostAnswerContract} ({@code
 * VersionColumnStoreLostAnswerIT}); here is what only this store promises: always "unknown" with
 * its advice (never a success, where the contract allows one), a compare-and-set's retry meeting
 * {@code expected + 1}, {@code update}'s read and its lost race, the batch, a pool with autocommit
 * off and the caller's transaction.
 */
@ExtendWith(PostgresExtension.class)
class LostAnswerIT {

  private static final String TABLE = "counters";
  private static final Predicate<String> COMPARE_AND_SET =
      JdbcFaults.sqlContaining("update \"counters\" set");
  private static final Predicate<String> BATCH_UPDATE =
      JdbcFaults.sqlContaining("update \"counters\" as");

  private final DSLContext dsl;
  private final JdbcFaults faults;
  private final VersionColumnStore<String, Long> healthy;
  private final VersionColumnStore<String, Long> store;

  LostAnswerIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.faults = JdbcFaults.pool(schema.jdbcUrl());
    this.healthy = store(schema.dataSource());
    this.store = store(faults.dataSource());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  @AfterEach
  void closePool() {
    faults.close();
  }

  private static VersionColumnStore<String, Long> store(DataSource dataSource) {
    return Tables.counterStore(dataSource);
  }

  private static String newId() {
    return "lost-" + UUID.randomUUID();
  }

  @Test
  void aCompareAndSetWhoseAnswerWasLostIsUnknownAndARetryIsAConflictWithItsOwnVersion() {
    String id = newId();
    Version v1 = healthy.insert(id, 1L).get().version();
    Version v2 = Version.of(v1.asLong() + 1);
    InjectedFault fault = faults.onNextStatement(FaultKind.ANSWER_LOST, COMPARE_AND_SET);

    Throwable thrown = catchThrowable(() -> store.compareAndSet(id, v1, 2L));

    fault.assertFired();
    assertThat(healthy.read(id).get()).isEqualTo(new Versioned<>(2L, v2));
    assertThat(thrown)
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("outcome is unknown");
    assertThat(store.compareAndSet(id, v1, 2L).getLeft().current()).contains(v2);
    assertThat(healthy.read(id).get()).isEqualTo(new Versioned<>(2L, v2));
  }

  @Test
  void anUpdateWhoseWriteLandedWithItsAnswerLostIsUnknownAndAppliedOnce() {
    String id = newId();
    healthy.insert(id, 100L);
    InjectedFault fault = faults.onNextStatement(FaultKind.ANSWER_LOST, COMPARE_AND_SET);
    AtomicInteger calls = new AtomicInteger();

    Throwable thrown = catchThrowable(() -> store.update(id, b -> counted(calls, b + 10)));

    fault.assertFired();
    assertThat(healthy.read(id).get().value()).as("+10 applied exactly once").isEqualTo(110L);
    assertThat(calls).as("the change ran once: no retry after the lost answer").hasValue(1);
    assertThat(thrown)
        .as("the outcome is reported unknown")
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("outcome is unknown")
        .hasMessageContaining("before you call update again");
  }

  @Test
  void anUpdateThatLostARaceAndThenLostItsAnswerAppliesItsChangeOnce() {
    String id = newId();
    healthy.insert(id, 100L);
    InjectedFault fault =
        faults.onNextStatement(FaultKind.ANSWER_LOST, nth(2, COMPARE_AND_SET)); // the retry's
    AtomicInteger calls = new AtomicInteger();

    Throwable thrown =
        catchThrowable(
            () ->
                store.update(
                    id,
                    b -> {
                      if (calls.incrementAndGet() == 1) {
                        Tables.bumpBehindTheStoresBack(dsl, TABLE, id); // the first attempt loses
                      }
                      return b + 10;
                    }));

    fault.assertFired();
    assertThat(healthy.read(id).get().value())
        .as("the other writer's +100 and this update's +10, each once")
        .isEqualTo(210L);
    assertThat(calls).as("one lost race, one attempt whose answer was lost").hasValue(2);
    assertThat(thrown).isInstanceOf(BackendUnavailableException.class);
  }

  @Test
  void anUpdateWhoseReadFailsCallsNothingAndWritesNothing() {
    String id = newId();
    Versioned<Long> before = healthy.insert(id, 100L).get();
    InjectedFault fault =
        faults.onNextStatement(FaultKind.ANSWER_LOST, JdbcFaults.sqlContaining("select"));
    AtomicInteger calls = new AtomicInteger();

    assertThatThrownBy(() -> store.update(id, b -> counted(calls, b + 10)))
        .isInstanceOf(BackendUnavailableException.class);

    fault.assertFired();
    assertThat(calls).hasValue(0);
    assertThat(healthy.read(id).get()).isEqualTo(before);
  }

  @Test
  void aBatchWhoseCommitLandedWithItsAnswerLostIsUnknownAndWrittenOnce() {
    List<String> ids = List.of(newId(), newId());
    List<VersionedWrite<String, Long>> writes =
        ids.stream()
            .map(id -> VersionedWrite.of(id, healthy.insert(id, 1L).get().version(), 2L))
            .toList();
    InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);

    assertThatThrownBy(() -> store.compareAndSetAll(writes))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("unknown");

    fault.assertFired();
    for (VersionedWrite<String, Long> write : writes) {
      Version next = Version.of(write.expected().asLong() + 1);
      assertThat(healthy.read(write.id()).get()).isEqualTo(new Versioned<>(2L, next));
    }
    assertThat(store.compareAndSetAll(writes))
        .as("sent again after 'unknown': each row is a conflict with the batch's own version")
        .allSatisfy(outcome -> assertThat(outcome.isLeft()).isTrue());
  }

  @Test
  void aBatchWhoseCommitOrStatementWasLostIsUnknownAndWritesNothing() {
    String id = newId();
    Versioned<Long> before = healthy.insert(id, 1L).get();
    List<VersionedWrite<String, Long>> writes =
        List.of(VersionedWrite.of(id, before.version(), 2L));

    InjectedFault commit = faults.onNextCommit(FaultKind.REQUEST_LOST);
    assertThatThrownBy(() -> store.compareAndSetAll(writes))
        .isInstanceOf(BackendUnavailableException.class);
    commit.assertFired();
    assertThat(healthy.read(id).get()).isEqualTo(before);

    // The UPDATE ran in the batch's transaction; the connection closed before the COMMIT.
    InjectedFault statement = faults.onNextStatement(FaultKind.ANSWER_LOST, BATCH_UPDATE);
    assertThatThrownBy(() -> store.compareAndSetAll(writes))
        .isInstanceOf(BackendUnavailableException.class);
    statement.assertFired();
    assertThat(healthy.read(id).get()).isEqualTo(before);
  }

  @Test
  void onAPoolWithAutocommitOffALostCommitAnswerIsUnknownAndTheUpdateLandsOnce() {
    VersionColumnStore<String, Long> autocommitOff = store(autocommitOff(faults.dataSource()));
    String id = newId();
    healthy.insert(id, 100L);
    InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
    AtomicInteger calls = new AtomicInteger();

    Throwable thrown = catchThrowable(() -> autocommitOff.update(id, b -> counted(calls, b + 10)));

    fault.assertFired();
    assertThat(healthy.read(id).get().value()).as("+10 applied exactly once").isEqualTo(110L);
    assertThat(calls).hasValue(1);
    assertThat(thrown).isInstanceOf(BackendUnavailableException.class);
  }

  @Test
  void aLostAnswerInsideTheCallersTransactionIsUnknownAndRollsItBack() {
    String id = newId();
    Versioned<Long> before = healthy.insert(id, 100L).get();
    InjectedFault fault = faults.onNextStatement(FaultKind.ANSWER_LOST, COMPARE_AND_SET);

    assertThatThrownBy(
            () ->
                faults
                    .dsl()
                    .transaction(
                        configuration ->
                            store.inTransaction(configuration.dsl()).update(id, b -> b + 10)))
        .isInstanceOf(BackendUnavailableException.class);

    fault.assertFired();
    assertThat(healthy.read(id).get())
        .as("the closed connection rolled the caller's transaction back")
        .isEqualTo(before);
  }

  /**
   * The caller's own {@code COMMIT} lost its answer: only the caller can know whether to run the
   * transaction again. The README's recipe: record the request in the same transaction, first, with
   * {@code insert}; the retry finds it and rolls back, so the change lands once.
   */
  @Test
  void aCallersRetryAfterItsLostCommitFindsItsRequestMarkerAndChangesNothingTwice() {
    String account = newId();
    String request = "request-" + UUID.randomUUID();
    healthy.insert(account, 100L);
    InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);

    assertThatThrownBy(() -> pay(account, request)).isInstanceOf(DataAccessException.class);
    fault.assertFired();
    Option<Conflict> retry = pay(account, request);

    assertThat(retry.isDefined()).as("the retry found its request already done").isTrue();
    assertThat(healthy.read(account).get().value()).isEqualTo(90L);
  }

  /** The caller's transaction: records {@code request}, then takes 10 from {@code account}. */
  private Option<Conflict> pay(String account, String request) {
    return faults
        .dsl()
        .transactionResult(
            configuration -> {
              VersionColumnStore<String, Long> tx = store.inTransaction(configuration.dsl());
              Either<Conflict, Versioned<Long>> marker = tx.insert(request, 0L);
              if (marker.isLeft()) {
                return Option.of(marker.getLeft()); // done before: commit nothing new
              }
              tx.update(account, b -> b - 10)
                  .getOrElseThrow(lost -> new IllegalStateException("lost: " + lost));
              return Option.none();
            });
  }

  private static long counted(AtomicInteger calls, long newValue) {
    calls.incrementAndGet();
    return newValue;
  }

  /** Matches the {@code n}-th statement that {@code sql} matches. */
  private static Predicate<String> nth(int n, Predicate<String> sql) {
    AtomicInteger seen = new AtomicInteger();
    return statement -> sql.test(statement) && seen.incrementAndGet() == n;
  }

  /** Hands out the pool's connections with autocommit off, as a pool configured so would. */
  private static DataSource autocommitOff(DataSource pool) {
    return new DataSource() {
      @Override
      public Connection getConnection() throws SQLException {
        Connection connection = pool.getConnection();
        connection.setAutoCommit(false);
        return connection;
      }

      @Override
      public Connection getConnection(String user, String password) {
        throw new UnsupportedOperationException();
      }

      @Override
      public PrintWriter getLogWriter() {
        return null;
      }

      @Override
      public void setLogWriter(PrintWriter out) {}

      @Override
      public void setLoginTimeout(int seconds) {}

      @Override
      public int getLoginTimeout() {
        return 0;
      }

      @Override
      public Logger getParentLogger() {
        return Logger.getGlobal();
      }

      @Override
      public <T> T unwrap(Class<T> type) throws SQLException {
        throw new SQLException("not a wrapper");
      }

      @Override
      public boolean isWrapperFor(Class<?> type) {
        return false;
      }
    };
  }
}
