package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jooq.DSLContext;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The statement a waiter sends in turn, applied by the server with its answer lost ({@link
 * JdbcFaults} below the pool; pgjdbc never resends): the waiter reports "unknown" (a {@link
 * BackendUnavailableException}), never a definite "not acquired", and leaves no place behind that
 * would hold the others up.
 */
@ExtendWith(PostgresExtension.class)
class WaitingInTurnLostAnswerIT {

  private static final Duration TTL = Duration.ofSeconds(30);

  private final DSLContext dsl;
  private final JdbcFaults faults;
  private final PostgresLockBackend backend;
  private final PostgresLockBackend faulty;
  private final FencedLock holder;
  private final FencedLock waiter;
  private final String name = "report-" + UUID.randomUUID();
  private final ExecutorService threads = Executors.newSingleThreadExecutor();

  WaitingInTurnLostAnswerIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.faults = JdbcFaults.pool(schema.jdbcUrl());
    this.backend = PostgresLockBackend.create(schema.dataSource());
    this.faulty = PostgresLockBackend.create(faults.dataSource());
    this.holder = FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    this.waiter = FencedLock.create(faulty, LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  @AfterEach
  void close() {
    threads.shutdownNow();
    waiter.close();
    holder.close();
    faulty.close();
    backend.close();
    faults.close();
  }

  /** A refused attempt whose answer is lost: the place it took is given up when acquire fails. */
  @Test
  void aRefusalWhoseAnswerIsLostIsUnknownAndLeavesNoPlace() {
    HeldLock held = holder.tryAcquire(name, TTL).get();
    InjectedFault lost = faults.onNextStatement(FaultKind.ANSWER_LOST, inTurn());

    assertThatThrownBy(() -> waiter.acquire(name, TTL, Duration.ofSeconds(30)))
        .isInstanceOf(BackendUnavailableException.class);

    lost.assertFired();
    assertThat(rowsOf(name)).as("places left behind").isZero();
    held.release();
  }

  /**
   * A granting attempt whose answer is lost: the caller hears "unknown", the grant it never saw
   * holds the lease until its TTL (as for any lost grant), and its place is gone with the grant.
   */
  @Test
  void aGrantWhoseAnswerIsLostIsUnknownAndLeavesNoPlace() throws Exception {
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, Duration.ofSeconds(30)));
    await().atMost(Duration.ofSeconds(10)).until(() -> rowsOf(name) == 1);
    InjectedFault lost = faults.onNextStatement(FaultKind.ANSWER_LOST, inTurn());

    held.release();

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThatThrownBy(waiting::get)
        .isInstanceOf(ExecutionException.class)
        .hasCauseInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    assertThat(backend.holder(name)).as("the unseen grant holds the lease").isNotEmpty();
    assertThat(rowsOf(name)).as("places left behind").isZero();
  }

  private static java.util.function.Predicate<String> inTurn() {
    return JdbcFaults.sqlContaining("with me as");
  }

  private int rowsOf(String lockName) {
    return dsl.fetchCount(
        DSL.table(DSL.name(PostgresLockConfig.DEFAULT_TABLE + PostgresLockConfig.WAITERS_SUFFIX)),
        DSL.field(DSL.name("name")).eq(lockName));
  }
}
