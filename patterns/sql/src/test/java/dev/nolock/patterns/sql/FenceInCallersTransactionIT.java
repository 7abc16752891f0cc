package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencedWrite;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.WriteId;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.sql.Connection;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link Fence#write} in the caller's own JDBC transaction (a connection with auto-commit off),
 * through {@code DSL.using(connection)} and through the {@link Connection} overload: it joins that
 * transaction and never commits it, so the caller's rollback undoes the caller's statements, the
 * fenced writes and the fence's own rows alike.
 */
@ExtendWith(PostgresExtension.class)
class FenceInCallersTransactionIT {

  private static final Table<?> ACCOUNTS = table(name("accounts"));
  private static final Field<Integer> ID = field(name("id"), Integer.class);
  private static final Field<Long> BALANCE = field(name("balance"), Long.class);
  private static final Table<?> FENCES = table(name("nolock_fences"));
  private static final Table<?> WRITES = table(name("nolock_fences_writes"));
  private static final Field<String> FENCE_NAME = field(name("name"), String.class);
  private static final AtomicInteger LOCKS = new AtomicInteger();

  private static Fence fence;

  private final PostgresSchema schema;
  private String lock;

  FenceInCallersTransactionIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    fence = Fence.onTable("nolock_fences");
    fence.createTableIfMissing(schema.dsl());
    schema.dsl().execute("create table accounts (id int primary key, balance bigint not null)");
  }

  @BeforeEach
  void freshAccountsAndLock() {
    schema.dsl().deleteFrom(ACCOUNTS).execute();
    schema.dsl().insertInto(ACCOUNTS, ID, BALANCE).values(1, 100L).execute();
    lock = "accounts-" + LOCKS.incrementAndGet();
  }

  /** The caller's own statement: a second account, inserted before the fenced write. */
  private static void callersInsert(Connection connection) {
    DSL.using(connection, SQLDialect.POSTGRES)
        .insertInto(ACCOUNTS, ID, BALANCE)
        .values(2, 50L)
        .execute();
  }

  private static int credit(DSLContext tx) {
    return tx.update(ACCOUNTS).set(BALANCE, BALANCE.plus(10L)).where(ID.eq(1)).execute();
  }

  @Test
  void createTableIfMissingOnTheCallersConnectionLeavesTheCallersTransactionOpen()
      throws Exception {
    Fence created = Fence.onTable("created_in_callers_tx");
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      created.createTableIfMissing(DSL.using(connection, SQLDialect.POSTGRES));

      assertThat(connection.getAutoCommit()).as("still the caller's transaction").isFalse();
      assertThat(schema.dsl().fetchCount(ACCOUNTS, ID.eq(2)))
          .as("the caller's insert is not committed by createTableIfMissing")
          .isZero();
      connection.rollback();
    }

    assertThat(schema.dsl().fetchCount(ACCOUNTS, ID.eq(2))).isZero();
    assertThat(
            schema
                .dsl()
                .fetchSingle("select to_regclass('created_in_callers_tx') is null")
                .get(0, Boolean.class))
        .as("the DDL rolled back with the caller's transaction")
        .isTrue();
  }

  @Test
  void throughADslOverTheCallersConnectionTheCallersRollbackUndoesEverything() throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      Either<FenceRejection, Integer> written =
          fence.write(
              DSL.using(connection, SQLDialect.POSTGRES),
              lease("A#1", 7),
              FenceInCallersTransactionIT::credit);

      assertThat(written.get()).isEqualTo(1);
      assertThat(connection.getAutoCommit()).as("still the caller's transaction").isFalse();
      connection.rollback();
    }

    assertNothingOfTheCallersTransactionIsLeft();
  }

  @Test
  void throughTheConnectionOverloadTheCallersRollbackUndoesEverything() throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      Either<FenceRejection, FencedWrite<Integer>> written =
          fence.write(
              connection,
              lease("A#1", 7),
              WriteId.of("credit-1"),
              FenceInCallersTransactionIT::credit);

      assertThat(written.get()).isEqualTo(new FencedWrite.Applied<>(WriteId.of("credit-1"), 1));
      assertThat(connection.getAutoCommit()).isFalse();
      connection.rollback();
    }

    assertNothingOfTheCallersTransactionIsLeft();
    assertThat(schema.dsl().fetchCount(WRITES, FENCE_NAME.eq(lock)))
        .as("the write id rolled back with the caller")
        .isZero();
  }

  @Test
  void theCallersCommitCommitsTheCallersStatementsAndTheFencedWritesTogether() throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);
      fence.write(connection, lease("A#1", 7), FenceInCallersTransactionIT::credit);

      assertThat(balanceSeenByAnotherConnection(1))
          .as("nothing is visible before the caller commits")
          .isEqualTo(100L);
      connection.commit();
    }

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(110L);
    assertThat(balanceSeenByAnotherConnection(2)).isEqualTo(50L);
    assertThat(schema.dsl().fetchCount(FENCES, FENCE_NAME.eq(lock))).isEqualTo(1);
  }

  @Test
  void aRejectionInTheCallersTransactionUndoesOnlyTheFencesPartAndLeavesTheDecisionToTheCaller()
      throws Exception {
    fence.write(schema.dsl(), lease("B#1", 8), tx -> 0);
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      Either<FenceRejection, Integer> late =
          fence.write(connection, lease("A#1", 7), FenceInCallersTransactionIT::credit);

      assertThat(late.getLeft())
          .isEqualTo(
              new FenceRejection(lock, FencingToken.of(7), "A#1", FencingToken.of(8), "B#1"));
      assertThat(connection.getAutoCommit()).isFalse();
      // The transaction is still usable, and the caller's own insert is still in it.
      assertThat(DSL.using(connection, SQLDialect.POSTGRES).fetchCount(ACCOUNTS, ID.eq(2)))
          .isEqualTo(1);
      connection.rollback();
    }

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(100L);
  }

  /**
   * A rejected write took the fence row's lock (the upsert's conflict check locks the row even when
   * its condition refuses the update); left in the caller's transaction, that lock would hold the
   * newer holder's fenced writes until the stale caller ends its transaction.
   */
  @Test
  void aRejectionInTheCallersTransactionDoesNotHoldTheFenceRowForTheNewerHolder() throws Exception {
    fence.write(schema.dsl(), lease("B#1", 8), tx -> 0);
    try (Connection stale = schema.dataSource().getConnection()) {
      stale.setAutoCommit(false);
      callersInsert(stale);
      assertThat(fence.write(stale, lease("A#1", 7), FenceInCallersTransactionIT::credit).isLeft())
          .isTrue();

      // The stale caller's transaction is still open: the newer holder writes, and would wait on
      // the row lock (failing after lock_timeout) if the rejection had kept it.
      try (Connection newer = schema.dataSource().getConnection()) {
        newer.setAutoCommit(false);
        DSL.using(newer, SQLDialect.POSTGRES).execute("set local lock_timeout = '2s'");
        assertThat(
                fence.write(newer, lease("B#1", 8), FenceInCallersTransactionIT::credit).isRight())
            .isTrue();
        newer.commit();
      }
      stale.rollback();
    }

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(110L);
  }

  /**
   * Writes that open a jOOQ transaction of their own (a repository's usual idiom) get a savepoint,
   * not a top-level transaction that would commit the caller's whole transaction.
   */
  @Test
  void writesThatOpenAJooqTransactionDoNotCommitTheCallersTransaction() throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      Either<FenceRejection, Integer> written =
          fence.write(
              connection,
              lease("A#1", 7),
              tx -> tx.transactionResult(nested -> credit(nested.dsl())));

      assertThat(written.get()).isEqualTo(1);
      connection.rollback();
    }

    assertNothingOfTheCallersTransactionIsLeft();
  }

  @Test
  void writesThatThrowInTheCallersTransactionAreUndoneAndTheTransactionStaysUsable()
      throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      assertThatThrownBy(
              () ->
                  fence.write(
                      connection,
                      lease("A#1", 7),
                      tx -> {
                        credit(tx);
                        // A failed statement: without a savepoint, PostgreSQL would abort the
                        // whole transaction of the caller.
                        tx.execute("select 1/0");
                        return 0;
                      }))
          .hasMessageContaining("division by zero");

      DSLContext callers = DSL.using(connection, SQLDialect.POSTGRES);
      assertThat(callers.select(BALANCE).from(ACCOUNTS).where(ID.eq(1)).fetchSingle(BALANCE))
          .as("the fenced writes rolled back to before the call")
          .isEqualTo(100L);
      assertThat(callers.fetchCount(FENCES, FENCE_NAME.eq(lock))).isZero();
      assertThat(callers.fetchCount(ACCOUNTS, ID.eq(2))).as("the caller's insert").isEqualTo(1);
      connection.commit();
    }

    assertThat(balanceSeenByAnotherConnection(2)).isEqualTo(50L);
  }

  @Test
  void aCheckedExceptionFromTheWritesComesOutUnchangedAfterRollingBackToTheSavepoint()
      throws Exception {
    fence.write(schema.dsl(), lease("A#1", 7), tx -> 0);
    Overdrawn overdrawn = new Overdrawn("account 1 would go below zero");
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      callersInsert(connection);

      Overdrawn caught = null;
      try {
        fence.write(
            connection,
            lease("B#1", 8),
            tx -> {
              credit(tx);
              throw overdrawn;
            });
      } catch (Overdrawn thrown) {
        caught = thrown;
      }

      assertThat(caught).as("the writes' own exception, the same instance").isSameAs(overdrawn);
      assertThat(connection.getAutoCommit()).as("still the caller's transaction").isFalse();
      DSLContext callers = DSL.using(connection, SQLDialect.POSTGRES);
      assertThat(callers.select(BALANCE).from(ACCOUNTS).where(ID.eq(1)).fetchSingle(BALANCE))
          .as("the fenced writes rolled back to before the call")
          .isEqualTo(100L);
      assertThat(fenceRow(callers)).as("the fence row, not advanced to B's token").isEqualTo("7");
      assertThat(callers.fetchCount(ACCOUNTS, ID.eq(2))).as("the caller's insert").isEqualTo(1);
      connection.commit();
    }

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(100L);
    assertThat(balanceSeenByAnotherConnection(2)).isEqualTo(50L);
    assertThat(fenceRow(schema.dsl())).isEqualTo("7");
  }

  /** A checked exception of the caller's business rules, thrown by its fenced writes. */
  private static final class Overdrawn extends Exception {
    private static final long serialVersionUID = 1L;

    Overdrawn(String message) {
      super(message);
    }
  }

  private String fenceRow(DSLContext on) {
    return String.valueOf(
        on.select(field(name("token"), Long.class))
            .from(FENCES)
            .where(FENCE_NAME.eq(lock))
            .fetchSingle()
            .value1());
  }

  @Test
  void onAConnectionInAutoCommitTheWriteIsItsOwnTransactionAndAutoCommitIsRestored()
      throws Exception {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(true);

      fence.write(connection, lease("A#1", 7), FenceInCallersTransactionIT::credit);

      assertThat(connection.getAutoCommit()).isTrue();
    }

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(110L);
  }

  @Test
  void aDslOverADataSourceStillCommitsItsOwnTransaction() {
    fence.write(schema.dsl(), lease("A#1", 7), FenceInCallersTransactionIT::credit);

    assertThat(balanceSeenByAnotherConnection(1)).isEqualTo(110L);
  }

  @Test
  void aNullConnectionIsRefusedWithTheFix() {
    assertThatThrownBy(
            () ->
                fence.write(
                    (Connection) null, lease("A#1", 7), FenceInCallersTransactionIT::credit))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("connection");
  }

  private void assertNothingOfTheCallersTransactionIsLeft() {
    assertThat(schema.dsl().fetchCount(ACCOUNTS, ID.eq(2)))
        .as("the caller's insert, rolled back by the caller")
        .isZero();
    assertThat(balanceSeenByAnotherConnection(1))
        .as("the fenced write, rolled back with the caller's transaction")
        .isEqualTo(100L);
    assertThat(schema.dsl().fetchCount(FENCES, FENCE_NAME.eq(lock)))
        .as("the fence row's advance, rolled back with the caller's transaction")
        .isZero();
  }

  private long balanceSeenByAnotherConnection(int account) {
    return schema.dsl().select(BALANCE).from(ACCOUNTS).where(ID.eq(account)).fetchSingle(BALANCE);
  }

  private Lease lease(String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
