package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
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
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link Fence} against the real PostgreSQL: a stale token writes nothing, and the same scenarios
 * without the fence are caught by the same assertions (the negative controls).
 */
@ExtendWith(PostgresExtension.class)
class FenceIT {

  private static final Table<?> ACCOUNTS = table(name("accounts"));
  private static final Field<Integer> ID = field(name("id"), Integer.class);
  private static final Field<Long> BALANCE = field(name("balance"), Long.class);
  private static final Field<Long> WRITTEN_BY = field(name("written_by"), Long.class);
  private static final long INITIAL_BALANCE = 100;
  private static final AtomicInteger LOCKS = new AtomicInteger();

  private static DSLContext dsl;
  private static Fence fence;
  private static ExecutorService pool;

  private final FenceAuditor auditor = new FenceAuditor();
  private String lock;

  /** A protected write: the fence's, or the unprotected one of the negative controls. */
  private interface Writer {
    Either<FenceRejection, Integer> write(Lease lease, Function<DSLContext, Integer> writes);
  }

  private final Writer fenced = (lease, writes) -> fence.write(dsl, lease, writes::apply);
  private final Writer unfenced =
      (lease, writes) -> dsl.transactionResult(c -> Either.right(writes.apply(c.dsl())));

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    dsl = schema.dsl();
    fence = Fence.onTable("nolock_fences");
    fence.createTableIfMissing(dsl);
    dsl.execute(
        "create table accounts (id int primary key, balance bigint not null,"
            + " written_by bigint not null)");
    pool = Executors.newFixedThreadPool(8);
  }

  @AfterAll
  static void stopPool() {
    pool.shutdownNow();
  }

  @BeforeEach
  void freshAccountsAndLock() {
    dsl.deleteFrom(ACCOUNTS).execute();
    for (int id = 1; id <= 3; id++) {
      dsl.insertInto(ACCOUNTS, ID, BALANCE, WRITTEN_BY).values(id, INITIAL_BALANCE, 0L).execute();
    }
    lock = "accounts-" + LOCKS.incrementAndGet();
  }

  @Test
  void aStaleTokenIsRefusedAndWritesNothingNotEvenRowsTheNewHolderNeverTouched() {
    runStaleHolderScenario(fenced);

    auditor.assertNoStaleWriteAccepted();
    assertThat(auditor.attempts("A")).as("A's late write was attempted").isEqualTo(1);
    assertThat(auditor.refusals("A")).isEqualTo(1);
    assertAccountsHoldOnlyTheNewHoldersWrite();
  }

  @Test
  void negativeControlWithoutTheFenceTheSameScenarioIsCaughtAsALostUpdate() {
    runStaleHolderScenario(unfenced);

    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
    assertThatThrownBy(this::assertAccountsHoldOnlyTheNewHoldersWrite)
        .isInstanceOf(AssertionError.class);
  }

  @Test
  void theRejectionNamesTheTokenAndOwnerThatWon() {
    write(fenced, lease("B", 34), 1);
    Either<FenceRejection, Integer> late = write(fenced, lease("A", 33), 2);

    assertThat(late.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(33), "A", FencingToken.of(34), "B"));
    assertThat(late.getLeft().describe()).contains("stop writing");
  }

  @Test
  void anEqualTokenFromAnotherOwnerIsRefusedButTheSameOwnerMayWriteAgain() {
    // A backend that lost its counter reissues token 7 to B while A still holds it.
    assertThat(write(fenced, lease("A", 7), 1).isRight()).isTrue();
    assertThat(write(fenced, lease("A", 7), 2).isRight()).as("same owner, same token").isTrue();
    Either<FenceRejection, Integer> reissued = write(fenced, lease("B", 7), 3);

    assertThat(reissued.isLeft()).isTrue();
    assertThat(balances())
        .containsEntry(1, 7L)
        .containsEntry(2, 7L)
        .containsEntry(3, INITIAL_BALANCE);
  }

  @Test
  void negativeControlWithoutTheFenceAnEqualTokenFromAnotherOwnerIsCaught() {
    write(unfenced, lease("A", 7), 1);
    write(unfenced, lease("B", 7), 1);

    assertThatThrownBy(auditor::assertNoStaleWriteAccepted).hasMessageContaining("Lost update");
  }

  @Test
  void writesThatThrowRollBackTheFenceAdvanceToo() {
    write(fenced, lease("A", 5), 1);
    assertThatThrownBy(
            () ->
                fence.write(
                    dsl,
                    lease("B", 6),
                    tx -> {
                      tx.update(ACCOUNTS).set(BALANCE, 0L).where(ID.eq(2)).execute();
                      throw new IllegalStateException("business rule failed");
                    }))
        .hasMessageContaining("business rule failed");

    assertThat(balances()).containsEntry(2, INITIAL_BALANCE);
    assertThat(write(fenced, lease("A", 5), 3).isRight())
        .as("B's failed write did not advance the fence")
        .isTrue();
  }

  @Test
  void aCheckedExceptionFromTheWritesComesOutUnchangedAndTheFenceRowIsAsBefore() {
    write(fenced, lease("A", 5), 1);
    Overdrawn overdrawn = new Overdrawn("account 2 would go below zero");

    assertThat(overdrawAccountTwo(lease("B", 6), overdrawn))
        .as("the writes' own exception, neither wrapped nor swallowed")
        .isSameAs(overdrawn);

    assertThat(balances()).as("the writes rolled back").containsEntry(2, INITIAL_BALANCE);
    assertThat(fenceRow()).as("the fence row, not advanced to B's token").isEqualTo("5 A");
  }

  @Test
  void negativeControlTheSameWritesReturningNormallyWriteAndAdvanceTheFenceRow() {
    write(fenced, lease("A", 5), 1);

    assertThat(overdrawAccountTwo(lease("B", 6), null)).as("nothing thrown").isNull();

    assertThatThrownBy(() -> assertThat(balances()).containsEntry(2, INITIAL_BALANCE))
        .isInstanceOf(AssertionError.class);
    assertThatThrownBy(() -> assertThat(fenceRow()).isEqualTo("5 A"))
        .isInstanceOf(AssertionError.class);
  }

  /**
   * Under {@code lease}, empties account 2 through the fence and then throws {@code refusal} (when
   * not null), as a business rule discovered too late would; returns what the call threw, caught by
   * its own checked type.
   */
  private Overdrawn overdrawAccountTwo(Lease lease, Overdrawn refusal) {
    try {
      fence.write(
          dsl,
          lease,
          tx -> {
            tx.update(ACCOUNTS).set(BALANCE, 0L).where(ID.eq(2)).execute();
            if (refusal != null) {
              throw refusal;
            }
            return 1;
          });
      return null;
    } catch (Overdrawn thrown) {
      return thrown;
    }
  }

  /** A checked exception of the caller's business rules, thrown by its fenced writes. */
  private static final class Overdrawn extends Exception {
    private static final long serialVersionUID = 1L;

    Overdrawn(String message) {
      super(message);
    }
  }

  /** The lock's fence row as {@code "<token> <owner>"}. */
  private String fenceRow() {
    var row =
        dsl.select(field(name("token"), Long.class), field(name("owner"), String.class))
            .from(table(name("nolock_fences")))
            .where(field(name("name"), String.class).eq(lock))
            .fetchSingle();
    return row.value1() + " " + row.value2();
  }

  @Test
  void concurrentWritersWithDistinctTokensEndWithTheHighestTokensWrites() throws Exception {
    for (int round = 0; round < 10; round++) {
      freshAccountsAndLock();
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Either<FenceRejection, Integer>>> results = new ArrayList<>();
      for (long token = 1; token <= 8; token++) {
        Lease lease = lease("writer-" + token, token);
        results.add(
            pool.submit(
                () -> {
                  start.await();
                  return writeAllAccounts(fenced, lease);
                }));
      }
      start.countDown();
      int accepted = 0;
      for (Future<Either<FenceRejection, Integer>> result : results) {
        accepted += result.get(30, TimeUnit.SECONDS).isRight() ? 1 : 0;
      }

      assertThat(accepted).as("the highest token always gets through").isBetween(1, 8);
      assertEveryAccountWrittenBy(8);
    }
  }

  @Test
  void concurrentLowerTokensArrivingAfterTheHighestAreAllRefused() throws Exception {
    runHighestFirstThenLowerTokensConcurrently(fenced);

    auditor.assertNoStaleWriteAccepted();
    for (long token = 1; token <= 7; token++) {
      assertThat(auditor.attempts("writer-" + token)).isEqualTo(1);
      assertThat(auditor.refusals("writer-" + token)).isEqualTo(1);
    }
    assertEveryAccountWrittenBy(8);
  }

  @Test
  void negativeControlWithoutTheFenceLowerTokensArrivingAfterTheHighestAreCaught()
      throws Exception {
    runHighestFirstThenLowerTokensConcurrently(unfenced);

    assertThatThrownBy(auditor::assertNoStaleWriteAccepted).hasMessageContaining("Lost update");
    assertThatThrownBy(() -> assertEveryAccountWrittenBy(8)).isInstanceOf(AssertionError.class);
  }

  /**
   * B (token 34) takes over and writes account 1; A (token 33), paused past its lease, wakes and
   * tries to write all three accounts.
   */
  private void runStaleHolderScenario(Writer writer) {
    write(writer, lease("B", 34), 1);
    writeAllAccounts(writer, lease("A", 33));
  }

  private void runHighestFirstThenLowerTokensConcurrently(Writer writer) throws Exception {
    assertThat(writeAllAccounts(writer, lease("writer-8", 8)).isRight()).isTrue();
    CountDownLatch start = new CountDownLatch(1);
    List<Future<?>> late = new ArrayList<>();
    for (long token = 1; token <= 7; token++) {
      Lease lease = lease("writer-" + token, token);
      late.add(
          pool.submit(
              () -> {
                start.await();
                return writeAllAccounts(writer, lease);
              }));
    }
    start.countDown();
    for (Future<?> f : late) {
      f.get(30, TimeUnit.SECONDS);
    }
  }

  private Either<FenceRejection, Integer> write(Writer writer, Lease lease, int accountId) {
    return audited(
        writer,
        lease,
        tx ->
            tx.update(ACCOUNTS)
                .set(BALANCE, lease.token().value())
                .set(WRITTEN_BY, lease.token().value())
                .where(ID.eq(accountId))
                .execute());
  }

  private Either<FenceRejection, Integer> writeAllAccounts(Writer writer, Lease lease) {
    return audited(
        writer,
        lease,
        tx ->
            tx.update(ACCOUNTS).set(BALANCE, 0L).set(WRITTEN_BY, lease.token().value()).execute());
  }

  private Either<FenceRejection, Integer> audited(
      Writer writer, Lease lease, Function<DSLContext, Integer> writes) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Either<FenceRejection, Integer> result = writer.write(lease, writes);
    if (result.isRight()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return result;
  }

  private void assertAccountsHoldOnlyTheNewHoldersWrite() {
    assertThat(writtenBy()).containsExactlyInAnyOrderEntriesOf(Map.of(1, 34L, 2, 0L, 3, 0L));
    assertThat(balances())
        .containsExactlyInAnyOrderEntriesOf(Map.of(1, 34L, 2, INITIAL_BALANCE, 3, INITIAL_BALANCE));
  }

  private void assertEveryAccountWrittenBy(long token) {
    assertThat(writtenBy().values()).as("written_by of every account").containsOnly(token);
  }

  private Map<Integer, Long> balances() {
    return dsl.select(ID, BALANCE).from(ACCOUNTS).fetchMap(ID, BALANCE);
  }

  private Map<Integer, Long> writtenBy() {
    return dsl.select(ID, WRITTEN_BY).from(ACCOUNTS).fetch().stream()
        .collect(Collectors.toMap(r -> r.value1(), r -> r.value2()));
  }

  private Lease lease(String owner, long token) {
    ManualLeaseClock clock = new ManualLeaseClock();
    return new Lease(
        lock, owner, FencingToken.of(token), Deadline.forHolder(clock, 0, Duration.ofSeconds(10)));
  }
}
