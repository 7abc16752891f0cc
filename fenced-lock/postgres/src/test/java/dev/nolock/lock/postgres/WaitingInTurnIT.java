package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FairLockBackendContract;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.lock.TimersNeverFire;
import dev.nolock.lock.postgres.internal.LockTable;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.concurrent.Future;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting for a held lock on PostgreSQL: the {@link FairLockBackendContract} (order, patience,
 * wake-up by {@code LISTEN}/{@code NOTIFY} and its control with listening off, a dead waiter's
 * place), and what only this backend has: the database's clock stepping back, the listen session
 * killed, a database not yet migrated to the queue.
 */
@ExtendWith(PostgresExtension.class)
class WaitingInTurnIT extends FairLockBackendContract {

  private final PostgresSchema schema;
  private final DSLContext dsl;

  WaitingInTurnIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  @Override
  protected FairLockBackend createBackend() {
    return PostgresLockBackend.create(schema.dataSource());
  }

  @Override
  protected FairLockBackend createBackendThatNeverWakes() {
    return PostgresLockBackend.create(
        schema.dataSource(), PostgresLockConfig.custom().listen(false).build());
  }

  @Override
  protected boolean wakeUpsReady(FairLockBackend backend) {
    return ((PostgresLockBackend) backend).listening();
  }

  @Override
  protected boolean queueGone(String lockName) {
    return dsl.fetchCount(waiters(), DSL.field(DSL.name("name")).eq(lockName)) == 0;
  }

  /**
   * A step back of the database's clock, as the queue sees it: a waiter's place records times an
   * hour ahead of the clock. A newcomer then joins behind it all the same, and once the lease is
   * free the waiter is served, the newcomer (out of patience at once) not counting as ahead.
   * Control: the newcomer's place moved before the waiter's, as joining at the clock alone would
   * put it, keeps the waiter out.
   */
  @Test
  void afterAStepBackOfTheClockANewcomerStillJoinsBehindTheWaiters() {
    assertThat(waiterAfterAStepBack(name + "-ordered", false)).as("the waiter").isNotEmpty();
    assertThat(waiterAfterAStepBack(name + "-at-the-clock", true))
        .as("the waiter, with the newcomer ahead of it")
        .isEmpty();
  }

  private Option<FencingToken> waiterAfterAStepBack(String lockName, boolean newcomerAtTheClock) {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    FencingToken held = backend.tryAcquire(lockName, "h#0", TTL).get();
    assertThat(backend.tryAcquireInTurn(lockName, "w#0", TTL, "w", TTL, Duration.ZERO)).isEmpty();
    dsl.execute(
        "UPDATE "
            + waitersTable()
            + " SET joined_at = joined_at + interval '1 hour', patient_until = patient_until"
            + " + interval '1 hour', expires_at = expires_at + interval '1 hour' WHERE name = ?",
        lockName);
    assertThat(backend.tryAcquireInTurn(lockName, "n#0", TTL, "n", TTL, Duration.ZERO)).isEmpty();
    if (newcomerAtTheClock) {
      dsl.execute(
          "UPDATE "
              + waitersTable()
              + " SET joined_at = clock_timestamp() WHERE name = ? AND waiter = 'n'",
          lockName);
    }
    assertThat(backend.release(lockName, "h#0", held)).isTrue();
    return backend.tryAcquireInTurn(lockName, "w#1", TTL, "w", TTL, Duration.ZERO);
  }

  private static String waitersTable() {
    return PostgresLockConfig.DEFAULT_TABLE + PostgresLockConfig.WAITERS_SUFFIX;
  }

  /**
   * The listen connection is killed while a waiter waits: the listener reconnects, and the next
   * release still wakes the waiter, whose timers never fire.
   */
  @Test
  void afterTheListenConnectionIsKilledTheListenerComesBackAndTheReleaseStillWakes()
      throws Exception {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    closing.add(backend);
    FencedLock holder = lock(backend, LeaseClock.system());
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(backend, timers);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    // Listening, and its start-up wake-up answered (the waiter waits again).
    await().atMost(Duration.ofSeconds(10)).until(() -> backend.listening() && timers.waits() >= 2);
    int waitsBefore = timers.waits();

    // Only this backend's listen session: other tests' listeners may share the server.
    int pid = backend.listenerBackendPid().orElseThrow();
    assertThat(
            dsl.select(DSL.field("pg_terminate_backend({0})", Boolean.class, DSL.val(pid)))
                .fetchOne(0, Boolean.class))
        .as("listen session killed")
        .isTrue();
    await().atMost(Duration.ofSeconds(10)).until(() -> !backend.listening());
    // Listening again, and the new start-up wake-up answered before the release.
    await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> backend.listening() && timers.waits() > waitsBefore);
    held.release();

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("woken after the listener came back").isTrue();
  }

  /**
   * A database not yet migrated to the queue (the lease table alone, as 0.1 made it): release and a
   * waiting acquire still work, without the queue, polling as before it existed.
   */
  @Test
  void withoutTheQueueTableReleaseAndAWaitingAcquireStillWork() throws Exception {
    dsl.execute("CREATE TABLE IF NOT EXISTS v1_locks (LIKE nolock_locks INCLUDING ALL)");
    PostgresLockBackend backend =
        PostgresLockBackend.create(
            schema.dataSource(), PostgresLockConfig.custom().table("v1_locks").build());
    FencedLock holder = lock(backend, LeaseClock.system());
    FencedLock waiter = lock(backend, LeaseClock.system());
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, Duration.ofSeconds(30)));
    // Its first attempt found no queue, fell back, was refused: it now polls.
    await().atMost(Duration.ofSeconds(10)).until(() -> !backend.wakesWaiters());

    assertThat(held.release()).as("released").isEqualTo(new ReleaseOutcome.Released());
    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("the waiter got the lock").isTrue();
  }

  /**
   * Negative control: on that database the queue's own release statement fails as a whole (the
   * lease is not freed): the fallback above is what keeps releases working.
   */
  @Test
  void withoutTheQueueTableTheQueuesReleaseStatementFails() {
    dsl.execute("CREATE TABLE IF NOT EXISTS v1_locks (LIKE nolock_locks INCLUDING ALL)");
    PostgresLockBackend backend =
        PostgresLockBackend.create(
            schema.dataSource(), PostgresLockConfig.custom().table("v1_locks").build());
    FencingToken token = backend.tryAcquire(name, "h#0", TTL).get();
    LockTable queued = new LockTable(DSL.name("v1_locks"), DSL.name("v1_locks_waiters"));

    assertThatThrownBy(
            () ->
                queued.release(dsl, name, "h#0", token.value(), PostgresLockConfig.CHANNEL).fetch())
        .isInstanceOf(DataAccessException.class)
        .hasMessageContaining("v1_locks_waiters");
    assertThat(backend.holder(name)).as("still held").isNotEmpty();
  }

  private FencedLock lock(LockBackend backend, LeaseClock clock) {
    if (backend instanceof AutoCloseable c) {
      closing.add(c);
    }
    return lock(backend, clock, LockConfig.DEFAULT_PATIENCE);
  }

  private static org.jooq.Table<?> waiters() {
    return DSL.table(
        DSL.name(PostgresLockConfig.DEFAULT_TABLE + PostgresLockConfig.WAITERS_SUFFIX));
  }

  /** Unexpired places in the queue of {@code lockName}. */
  @Override
  protected int placesOf(String lockName) {
    return dsl.fetchCount(
        waiters(),
        DSL.field(DSL.name("name")).eq(lockName),
        DSL.field(DSL.name("expires_at")).gt(DSL.field("clock_timestamp()")));
  }
}
