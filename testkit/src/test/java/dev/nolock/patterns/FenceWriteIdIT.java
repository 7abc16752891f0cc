package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A fenced write whose {@code COMMIT} PostgreSQL applied but whose answer was lost with the
 * connection ({@link JdbcFaults}), retried by the caller as it would after the exception: with a
 * {@link WriteId} the retry runs nothing and says so; without one (the negative control) the writes
 * run twice.
 */
@ExtendWith(PostgresExtension.class)
class FenceWriteIdIT {

  private static final Table<?> ACCOUNTS = table(name("accounts"));
  private static final Field<Integer> ID = field(name("id"), Integer.class);
  private static final Field<Long> BALANCE = field(name("balance"), Long.class);
  private static final long INITIAL_BALANCE = 100;
  private static final long CREDIT = 10;
  private static final AtomicInteger LOCKS = new AtomicInteger();

  private static Fence fence;

  private final PostgresSchema schema;
  private String lock;

  FenceWriteIdIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    fence = Fence.onTable("nolock_fences");
    fence.createTableIfMissing(schema.dsl());
    schema.dsl().execute("create table accounts (id int primary key, balance bigint not null)");
  }

  @BeforeEach
  void freshAccountAndLock() {
    schema.dsl().deleteFrom(ACCOUNTS).execute();
    schema.dsl().insertInto(ACCOUNTS, ID, BALANCE).values(1, INITIAL_BALANCE).execute();
    lock = "accounts-" + LOCKS.incrementAndGet();
  }

  @Test
  void aRetryAfterALostCommitAnswerCreditsTheBalanceOnce() {
    Lease lease = lease("A", 7);
    WriteId writeId = WriteId.of("credit-order-42");
    Either<FenceRejection, FencedWrite<Integer>> retried;
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
      assertLostConnection(() -> fence.write(faults.dsl(), lease, writeId, this::credit));
      fault.assertFired();

      retried = fence.write(faults.dsl(), lease, writeId, this::credit);
    }

    assertThat(balance())
        .as(
            "the balance after one credit of %d whose COMMIT answer was lost, and its retry",
            CREDIT)
        .isEqualTo(INITIAL_BALANCE + CREDIT);
    assertThat(retried.get())
        .isEqualTo(new FencedWrite.AlreadyWritten<>(lock, FencingToken.of(7), "A", writeId));
    assertThat(retried.get().alreadyWritten()).isTrue();
    assertThat(((FencedWrite.AlreadyWritten<Integer>) retried.get()).describe())
        .contains("credit-order-42", "already committed");
  }

  @Test
  void negativeControlWithoutAWriteIdTheRetryAfterALostCommitAnswerCreditsTwice() {
    Lease lease = lease("A", 7);
    Either<FenceRejection, Integer> retried;
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
      assertLostConnection(() -> fence.write(faults.dsl(), lease, this::credit));
      fault.assertFired();

      retried = fence.write(faults.dsl(), lease, this::credit);
    }

    assertThat(retried.get()).as("the retry ran the credit again").isEqualTo(1);
    assertThat(balance())
        .as("without a write id a fenced write must be idempotent: this one is not")
        .isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  @Test
  void aRetryAfterACommitThatNeverReachedTheServerRunsTheWrites() {
    Lease lease = lease("A", 7);
    WriteId writeId = WriteId.of("credit-order-43");
    Either<FenceRejection, FencedWrite<Integer>> retried;
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.REQUEST_LOST);
      assertLostConnection(() -> fence.write(faults.dsl(), lease, writeId, this::credit));
      fault.assertFired();
      assertThat(balance()).as("the first attempt rolled back").isEqualTo(INITIAL_BALANCE);

      retried = fence.write(faults.dsl(), lease, writeId, this::credit);
    }

    assertThat(retried.get()).isEqualTo(new FencedWrite.Applied<>(writeId, 1));
    assertThat(retried.get().alreadyWritten()).isFalse();
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void aRetryAfterANewerHolderWroteIsRefusedNotTakenForAlreadyWritten() {
    WriteId writeId = WriteId.of("credit-order-44");
    assertThat(fence.write(schema.dsl(), lease("A", 7), writeId, this::credit).isRight()).isTrue();
    assertThat(fence.write(schema.dsl(), lease("B", 8), writeId, this::credit).get())
        .as("a newer grant is a new write, whatever its id")
        .isEqualTo(new FencedWrite.Applied<>(writeId, 1));

    Either<FenceRejection, FencedWrite<Integer>> retried =
        fence.write(schema.dsl(), lease("A", 7), writeId, this::credit);

    assertThat(retried.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(7), "A", FencingToken.of(8), "B"));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  @Test
  void theSameTokenFromAnotherOwnerWithTheSameWriteIdIsRefused() {
    WriteId writeId = WriteId.of("credit-order-45");
    fence.write(schema.dsl(), lease("A", 7), writeId, this::credit);

    Either<FenceRejection, FencedWrite<Integer>> reissued =
        fence.write(schema.dsl(), lease("B", 7), writeId, this::credit);

    assertThat(reissued.getLeft().currentOwner()).isEqualTo("A");
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void anotherWriteIdOfTheSameLeaseRunsAndAWriteWithoutAnIdKeepsTheLastIdRecognised() {
    Lease lease = lease("A", 7);
    fence.write(schema.dsl(), lease, WriteId.of("first"), this::credit);
    assertThat(fence.write(schema.dsl(), lease, WriteId.of("second"), this::credit).get())
        .isEqualTo(new FencedWrite.Applied<>(WriteId.of("second"), 1));
    fence.write(schema.dsl(), lease, tx -> 0);

    assertThat(fence.write(schema.dsl(), lease, WriteId.of("second"), this::credit).get())
        .as("retried after a write without an id")
        .isInstanceOf(FencedWrite.AlreadyWritten.class);
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  /** The documented limit: the fence remembers the latest write id per lock, not every one. */
  @Test
  void aRetryAfterALaterWriteWithAnotherIdOfTheSameLeaseIsNotRecognisedAndRunsAgain() {
    Lease lease = lease("A", 7);
    fence.write(schema.dsl(), lease, WriteId.of("first"), this::credit);
    fence.write(schema.dsl(), lease, WriteId.of("second"), tx -> 0);

    assertThat(fence.write(schema.dsl(), lease, WriteId.of("first"), this::credit).get())
        .isEqualTo(new FencedWrite.Applied<>(WriteId.of("first"), 1));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  @Test
  void aNullWriteIdIsRefusedBeforeAnythingIsWritten() {
    assertThatThrownBy(() -> fence.write(schema.dsl(), lease("A", 7), null, this::credit))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("WriteId.of");
    assertThatThrownBy(
            () -> fence.write(schema.dsl(), lease("A", 7), WriteId.of(" "), this::credit))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blank");

    assertThat(balance()).isEqualTo(INITIAL_BALANCE);
    assertThat(schema.dsl().fetchCount(table(name("nolock_fences")), field(name("name")).eq(lock)))
        .as("no fence row for the lock")
        .isZero();
  }

  private static void assertLostConnection(Runnable call) {
    assertThatThrownBy(call::run)
        .isInstanceOf(DataAccessException.class)
        .rootCause()
        .isInstanceOf(SQLException.class)
        .hasFieldOrPropertyWithValue("SQLState", JdbcFaults.CONNECTION_FAILURE);
  }

  private int credit(DSLContext tx) {
    return tx.update(ACCOUNTS).set(BALANCE, BALANCE.plus(CREDIT)).where(ID.eq(1)).execute();
  }

  private long balance() {
    return schema.dsl().select(BALANCE).from(ACCOUNTS).where(ID.eq(1)).fetchSingle(BALANCE);
  }

  private Lease lease(String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
