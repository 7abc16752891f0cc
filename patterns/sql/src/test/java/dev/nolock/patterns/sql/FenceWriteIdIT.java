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
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.io.IOException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.stream.Collectors;
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
  private static final int RACE_ROUNDS = 20;

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
    schema
        .dsl()
        .insertInto(ACCOUNTS, ID, BALANCE)
        .values(1, INITIAL_BALANCE)
        .values(2, INITIAL_BALANCE)
        .execute();
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

  /**
   * The retry comes under a new grant: the caller's {@code withLock} released after the lost answer
   * and its retry acquired again, with the next token and a new owner nonce.
   */
  @Test
  void aRetryUnderANewGrantAfterALostCommitAnswerCreditsTheBalanceOnce() {
    WriteId writeId = WriteId.of("credit-order-44");
    Either<FenceRejection, FencedWrite<Integer>> retried;
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
      assertLostConnection(() -> fence.write(faults.dsl(), lease("A#1", 7), writeId, this::credit));
      fault.assertFired();

      retried = fence.write(faults.dsl(), lease("A#2", 8), writeId, this::credit);
    }

    assertThat(balance())
        .as(
            "the balance after one credit of %d whose COMMIT answer was lost under token 7, and"
                + " its retry under token 8",
            CREDIT)
        .isEqualTo(INITIAL_BALANCE + CREDIT);
    assertThat(retried.get())
        .as("the retry names the grant that wrote it")
        .isEqualTo(new FencedWrite.AlreadyWritten<>(lock, FencingToken.of(7), "A#1", writeId));
  }

  @Test
  void aRetryAfterALaterWriteOfTheSameGrantIsStillRecognised() {
    Lease lease = lease("A#1", 7);
    WriteId first = WriteId.of("credit-order-46");
    Either<FenceRejection, FencedWrite<Integer>> retried;
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
      assertLostConnection(() -> fence.write(faults.dsl(), lease, first, this::credit));
      fault.assertFired();
      assertThat(fence.write(faults.dsl(), lease, WriteId.of("credit-order-47"), this::credit))
          .isEqualTo(Either.right(new FencedWrite.Applied<>(WriteId.of("credit-order-47"), 1)));

      retried = fence.write(faults.dsl(), lease, first, this::credit);
    }

    assertThat(balance())
        .as(
            "the balance after credit-order-46 (answer lost), credit-order-47, and the retry of"
                + " credit-order-46")
        .isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
    assertThat(retried.get())
        .isEqualTo(new FencedWrite.AlreadyWritten<>(lock, FencingToken.of(7), "A#1", first));
  }

  /**
   * The rule for a fenced write inside the caller's own transaction: roll the transaction back on
   * {@code AlreadyWritten} as on a rejection. The transaction debits account 1 and credits account
   * 2 through the fence; its {@code COMMIT} answer is lost and the caller retries the whole
   * transaction. The retry's debit runs again before the fence answers {@code AlreadyWritten}.
   */
  @Test
  void inTheCallersTransactionRollingBackOnAlreadyWrittenDebitsOnce() {
    Either<FenceRejection, FencedWrite<Integer>> retried =
        transferWithALostCommitAnswerThenRetry(true);

    assertThat(retried.get().alreadyWritten()).isTrue();
    assertThat(balance(1)).as("account 1, debited once").isEqualTo(INITIAL_BALANCE - CREDIT);
    assertThat(balance(2)).as("account 2, credited once").isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void negativeControlInTheCallersTransactionCommittingOnAlreadyWrittenDebitsTwice() {
    Either<FenceRejection, FencedWrite<Integer>> retried =
        transferWithALostCommitAnswerThenRetry(false);

    assertThat(retried.get().alreadyWritten()).isTrue();
    assertThat(balance(1))
        .as("the retried transaction's own debit committed next to AlreadyWritten")
        .isEqualTo(INITIAL_BALANCE - 2 * CREDIT);
    assertThat(balance(2)).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void aStaleRetryWhoseEarlierAttemptCommittedIsAlreadyWrittenNotRefused() {
    WriteId writeId = WriteId.of("credit-order-45");
    fence.write(schema.dsl(), lease("A#1", 7), writeId, this::credit);
    fence.write(schema.dsl(), lease("B#1", 8), WriteId.of("credit-order-49"), this::credit);

    Either<FenceRejection, FencedWrite<Integer>> retried =
        fence.write(schema.dsl(), lease("A#1", 7), writeId, this::credit);

    assertThat(retried.get())
        .as("the write landed: that is the answer, whatever the retry's token")
        .isEqualTo(new FencedWrite.AlreadyWritten<>(lock, FencingToken.of(7), "A#1", writeId));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  @Test
  void theSameTokenFromAnotherOwnerIsRefusedForANewIdAndToldAlreadyWrittenForAWrittenOne() {
    WriteId writeId = WriteId.of("credit-order-50");
    fence.write(schema.dsl(), lease("A#1", 7), writeId, this::credit);

    Either<FenceRejection, FencedWrite<Integer>> newId =
        fence.write(schema.dsl(), lease("B#1", 7), WriteId.of("credit-order-51"), this::credit);
    Either<FenceRejection, FencedWrite<Integer>> writtenId =
        fence.write(schema.dsl(), lease("B#1", 7), writeId, this::credit);

    assertThat(newId.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(7), "B#1", FencingToken.of(7), "A#1"));
    assertThat(writtenId.get())
        .isEqualTo(new FencedWrite.AlreadyWritten<>(lock, FencingToken.of(7), "A#1", writeId));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void aRefusedWriteAndWritesThatThrowLeaveTheirIdUnrecorded() {
    fence.write(schema.dsl(), lease("B#1", 8), tx -> 0);
    WriteId refused = WriteId.of("credit-order-52");
    WriteId thrown = WriteId.of("credit-order-53");

    assertThat(fence.write(schema.dsl(), lease("A#1", 7), refused, this::credit).isLeft()).isTrue();
    assertThatThrownBy(
            () ->
                fence.write(
                    schema.dsl(),
                    lease("B#1", 8),
                    thrown,
                    tx -> {
                      credit(tx);
                      throw new IllegalStateException("business rule failed");
                    }))
        .hasMessageContaining("business rule failed");

    assertThat(writesRecorded()).as("write ids recorded for the lock").isZero();
    assertThat(fence.write(schema.dsl(), lease("C#1", 9), refused, this::credit).get())
        .isEqualTo(new FencedWrite.Applied<>(refused, 1));
    assertThat(fence.write(schema.dsl(), lease("C#1", 9), thrown, this::credit).get())
        .isEqualTo(new FencedWrite.Applied<>(thrown, 1));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * CREDIT);
  }

  @Test
  void writesThatThrowACheckedExceptionLeaveTheirIdUnrecordedAndTheExceptionUnchanged() {
    WriteId writeId = WriteId.of("credit-order-55");
    IOException unreachable = new IOException("the ledger did not answer");

    IOException caught = null;
    try {
      fence.write(
          schema.dsl(),
          lease("A#1", 7),
          writeId,
          tx -> {
            credit(tx);
            throw unreachable;
          });
    } catch (IOException thrown) {
      caught = thrown;
    }

    assertThat(caught).as("the same instance, neither wrapped nor swallowed").isSameAs(unreachable);
    assertThat(writesRecorded()).as("write ids recorded for the lock").isZero();
    assertThat(balance()).isEqualTo(INITIAL_BALANCE);
    assertThat(fence.write(schema.dsl(), lease("A#1", 7), writeId, this::credit).get())
        .as("the retry runs: the id was not recorded")
        .isEqualTo(new FencedWrite.Applied<>(writeId, 1));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void anAlreadyWrittenAnswerUnderANewerGrantLeavesTheFenceRowAsItWas() {
    WriteId writeId = WriteId.of("credit-order-54");
    fence.write(schema.dsl(), lease("A#1", 7), writeId, this::credit);

    fence.write(schema.dsl(), lease("A#2", 8), writeId, this::credit);

    assertThat(fence.write(schema.dsl(), lease("A#1", 7), tx -> 0).isRight())
        .as("token 7 still passes: the retry under token 8 ran nothing, not even the advance")
        .isTrue();
  }

  @Test
  void aWriteWithoutAnIdInBetweenKeepsAnIdRecognised() {
    Lease lease = lease("A#1", 7);
    fence.write(schema.dsl(), lease, WriteId.of("first"), this::credit);
    fence.write(schema.dsl(), lease, tx -> 0);

    assertThat(fence.write(schema.dsl(), lease, WriteId.of("first"), this::credit).get())
        .as("retried after a write without an id")
        .isInstanceOf(FencedWrite.AlreadyWritten.class);
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  /**
   * Two attempts with one write id at once, under two grants (the caller's first attempt still
   * running when its retry under a new lease starts): one applies, the other is told it was already
   * written; never both apply.
   */
  @Test
  void concurrentAttemptsWithOneWriteIdApplyOnce() throws Exception {
    Map<String, Long> outcomes = raceTwoCredits(true);

    assertThat(outcomes)
        .as("outcomes of %d rounds of two concurrent attempts with one write id", RACE_ROUNDS)
        .isEqualTo(Map.of("Applied", (long) RACE_ROUNDS, "AlreadyWritten", (long) RACE_ROUNDS));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + RACE_ROUNDS * CREDIT);
  }

  @Test
  void negativeControlConcurrentAttemptsOfOneLeaseWithoutAWriteIdBothApply() throws Exception {
    Map<String, Long> outcomes = raceTwoCredits(false);

    assertThat(outcomes).isEqualTo(Map.of("Applied", 2L * RACE_ROUNDS));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 2 * RACE_ROUNDS * CREDIT);
  }

  @Test
  void forgettingOldWriteIdsKeepsTheRecentOnesAndARetryOfAForgottenIdRunsAgain() {
    WriteId old = WriteId.of("credit-order-55");
    WriteId recent = WriteId.of("credit-order-56");
    fence.write(schema.dsl(), lease("A#1", 7), old, this::credit);
    fence.write(schema.dsl(), lease("A#1", 7), recent, this::credit);
    schema
        .dsl()
        .execute(
            "update nolock_fences_writes set written_at = written_at - interval '2 days'"
                + " where name = ? and write_id = ?",
            lock,
            old.value());

    int forgotten = fence.forgetWritesOlderThan(schema.dsl(), Duration.ofDays(1));

    assertThat(forgotten).isEqualTo(1);
    assertThat(fence.write(schema.dsl(), lease("A#2", 8), recent, this::credit).get())
        .isInstanceOf(FencedWrite.AlreadyWritten.class);
    assertThat(fence.write(schema.dsl(), lease("A#2", 8), old, this::credit).get())
        .as("the documented limit: a retry after its id was forgotten runs again")
        .isEqualTo(new FencedWrite.Applied<>(old, 1));
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + 3 * CREDIT);
  }

  @Test
  void negativeControlWithoutForgettingTheOldIdIsStillRecognised() {
    WriteId old = WriteId.of("credit-order-57");
    fence.write(schema.dsl(), lease("A#1", 7), old, this::credit);
    schema
        .dsl()
        .execute(
            "update nolock_fences_writes set written_at = written_at - interval '2 days'"
                + " where name = ? and write_id = ?",
            lock,
            old.value());

    assertThat(fence.write(schema.dsl(), lease("A#2", 8), old, this::credit).get())
        .isInstanceOf(FencedWrite.AlreadyWritten.class);
    assertThat(balance()).isEqualTo(INITIAL_BALANCE + CREDIT);
  }

  @Test
  void aRetentionThatIsNotPositiveIsRefused() {
    for (Duration retention : new Duration[] {null, Duration.ZERO, Duration.ofDays(-1)}) {
      assertThatThrownBy(() -> fence.forgetWritesOlderThan(schema.dsl(), retention))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("longer than any retry");
    }
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
    assertThat(writesRecorded()).as("no write id recorded for the lock").isZero();
  }

  /**
   * {@value #RACE_ROUNDS} rounds, each on a fresh lock: two credits at once, with one write id
   * under two grants (tokens 7 and 8) when {@code withIds}, else without an id under one lease
   * (which the fence cannot order by token); returns how many of each outcome.
   */
  private Map<String, Long> raceTwoCredits(boolean withIds) throws Exception {
    ExecutorService writers = Executors.newFixedThreadPool(2);
    List<String> outcomes = new ArrayList<>();
    try {
      for (int round = 0; round < RACE_ROUNDS; round++) {
        lock = "race-" + LOCKS.incrementAndGet();
        WriteId writeId = WriteId.of("credit-order-race-" + round);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<String>> attempts = new ArrayList<>();
        for (long token = 7; token <= 8; token++) {
          Lease lease = withIds ? lease("A#" + token, token) : lease("A#8", 8);
          attempts.add(
              writers.submit(
                  () -> {
                    start.await();
                    if (!withIds) {
                      return fence.write(schema.dsl(), lease, this::credit).isRight()
                          ? "Applied"
                          : "Rejected";
                    }
                    return fence
                        .write(schema.dsl(), lease, writeId, this::credit)
                        .fold(
                            rejected -> "Rejected", written -> written.getClass().getSimpleName());
                  }));
        }
        start.countDown();
        for (Future<String> attempt : attempts) {
          outcomes.add(attempt.get(30, TimeUnit.SECONDS));
        }
      }
    } finally {
      writers.shutdownNow();
    }
    return outcomes.stream()
        .collect(Collectors.groupingBy(Function.identity(), Collectors.counting()));
  }

  private int writesRecorded() {
    return schema
        .dsl()
        .fetchCount(table(name("nolock_fences_writes")), field(name("name")).eq(lock));
  }

  private static void assertLostConnection(Runnable call) {
    assertThatThrownBy(call::run)
        .isInstanceOf(DataAccessException.class)
        .rootCause()
        .isInstanceOf(SQLException.class)
        .hasFieldOrPropertyWithValue("SQLState", JdbcFaults.CONNECTION_FAILURE);
  }

  /**
   * One transaction of the caller: debit account 1, then credit account 2 through the fence with a
   * write id. It rolls back on a rejection, and on {@code AlreadyWritten} when {@code
   * rollBackOnAlreadyWritten}. The first attempt's {@code COMMIT} answer is lost; the caller
   * retries the whole transaction; the retry's answer is returned.
   */
  private Either<FenceRejection, FencedWrite<Integer>> transferWithALostCommitAnswerThenRetry(
      boolean rollBackOnAlreadyWritten) {
    Lease lease = lease("A#1", 7);
    WriteId writeId = WriteId.of("transfer-48");
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
      assertLostConnection(() -> transfer(faults.dsl(), lease, writeId, rollBackOnAlreadyWritten));
      fault.assertFired();

      return transfer(faults.dsl(), lease, writeId, rollBackOnAlreadyWritten);
    }
  }

  private Either<FenceRejection, FencedWrite<Integer>> transfer(
      DSLContext dsl, Lease lease, WriteId writeId, boolean rollBackOnAlreadyWritten) {
    try {
      return dsl.transactionResult(
          c -> {
            DSLContext tx = c.dsl();
            tx.update(ACCOUNTS).set(BALANCE, BALANCE.minus(CREDIT)).where(ID.eq(1)).execute();
            Either<FenceRejection, FencedWrite<Integer>> credited =
                fence.write(tx, lease, writeId, t -> credit(t, 2));
            if (credited.isLeft()
                || (rollBackOnAlreadyWritten && credited.get().alreadyWritten())) {
              throw new RolledBack(credited);
            }
            return credited;
          });
    } catch (RolledBack rolledBack) {
      return rolledBack.answer;
    }
  }

  /** Thrown out of the caller's transaction to roll it back, carrying the fence's answer. */
  private static final class RolledBack extends RuntimeException {
    private static final long serialVersionUID = 1L;

    final transient Either<FenceRejection, FencedWrite<Integer>> answer;

    RolledBack(Either<FenceRejection, FencedWrite<Integer>> answer) {
      super(null, null, false, false);
      this.answer = answer;
    }
  }

  private int credit(DSLContext tx) {
    return credit(tx, 1);
  }

  private static int credit(DSLContext tx, int account) {
    return tx.update(ACCOUNTS).set(BALANCE, BALANCE.plus(CREDIT)).where(ID.eq(account)).execute();
  }

  private long balance() {
    return balance(1);
  }

  private long balance(int account) {
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
