package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.ForwardingLockBackend;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.lock.TimersNeverFire;
import dev.nolock.lock.postgres.internal.LockTable;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting for a held lock on PostgreSQL: callers in separate processes (one backend and one {@link
 * FencedLock} each) are served in the order they began to wait, a release wakes them through {@code
 * LISTEN}/{@code NOTIFY}, and a waiter that died holds the others up only until its place expires.
 * Each with the control that shows what happens without the protection.
 *
 * <p>Most tests run the waiters on a clock whose timers never fire ({@link TimersNeverFire}): a
 * waiter then asks again only when a backend wakes it, so the order and the wake-ups are the
 * backend's doing, not the luck of the jittered backoff.
 */
@ExtendWith(PostgresExtension.class)
class WaitingInTurnIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final Duration LONG_WAIT = Duration.ofMinutes(5);

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private final String name = "report-" + UUID.randomUUID();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private final ExecutorService threads = Executors.newCachedThreadPool();

  WaitingInTurnIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  @AfterEach
  void close() throws Exception {
    threads.shutdownNow(); // ends the waits on a clock whose timers never fire
    for (int i = closing.size() - 1; i >= 0; i--) {
      closing.get(i).close();
    }
  }

  /**
   * Three waiters queue behind a holder; the holder releases and at once asks again. Each waiter is
   * served in the order it began to wait, and the holder, now the last to ask, comes after them.
   */
  @Test
  void waitersAreServedInTheOrderTheyBeganToWaitAndTheReleaserQueuesBehindThem() throws Exception {
    List<String> served = servedOrder(PostgresLockBackend::create, Duration.ZERO);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * Negative control: the same backend seen only as a plain {@link LockBackend} (no queue, no
   * wake-ups), as any backend was before. The holder asks again right after its release and takes
   * the lock ahead of all three waiters, whose timers have not fired.
   */
  @Test
  void withoutTheQueueTheReleaserTakesTheLockAgainAheadOfTheWaiters() throws Exception {
    List<String> served =
        servedOrder(backend -> plain(PostgresLockBackend.create(backend)), Duration.ZERO);

    await().atMost(Duration.ofSeconds(30)).until(() -> !served.isEmpty());
    assertThat(served.get(0)).isEqualTo("holder");
  }

  /**
   * The default patience: the waiters have waited far longer than 20 ms by the time of the release
   * (each joined only after the one before was seen in the queue), so the releaser queues behind
   * them as with strict order.
   */
  @Test
  void withTheDefaultPatienceWaitersThatWaitedLongerAreServedFirst() throws Exception {
    List<String> served = servedOrder(PostgresLockBackend::create, LockConfig.DEFAULT_PATIENCE);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * The patience rule on the statement itself, with the waiters' own patience: three places queue
   * behind a holder, the holder releases, and a newcomer asks at once. Waiters that let newer
   * callers go ahead for a minute let it take the lock; waiters with zero patience do not, and the
   * newcomer queues, whatever patience it has itself.
   */
  @Test
  void waitersWithinTheirPatienceLetANewcomerGoAheadAndWithZeroTheyDoNot() {
    assertThat(newcomerAfterTheRelease(name + "-patient", LockConfig.MAX_PATIENCE))
        .as("behind waiters patient for a minute")
        .isNotEmpty();
    assertThat(newcomerAfterTheRelease(name + "-strict", Duration.ZERO))
        .as("behind waiters with zero patience")
        .isEmpty();
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

  /** What a newcomer (itself patient for a minute) gets right after the release. */
  private Option<FencingToken> newcomerAfterTheRelease(String lockName, Duration waitersPatience) {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    FencingToken held = backend.tryAcquire(lockName, "h#0000000000000000", TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      assertThat(
              backend.tryAcquireInTurn(lockName, waiter + "#0", TTL, waiter, TTL, waitersPatience))
          .isEmpty();
    }
    assertThat(backend.release(lockName, "h#0000000000000000", held)).isTrue();
    return backend.tryAcquireInTurn(
        lockName, "newcomer#0", TTL, "newcomer", TTL, LockConfig.MAX_PATIENCE);
  }

  /**
   * A waiter whose timers never fire is woken by the release alone: the notification reaches it and
   * it takes the lock.
   */
  @Test
  void aReleaseWakesAWaiterWhoseTimersNeverFire() throws Exception {
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(true);

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("acquired after the release").isTrue();
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
   * Negative control: with listening off, the same waiter is never told: the lease is free and the
   * waiter still waits. (It polls, without a place: a waiter nobody wakes must not hold the queue
   * up.)
   */
  @Test
  void withListeningOffTheSameWaiterIsNeverWoken() throws Exception {
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(false);

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(Duration.ofSeconds(3))
        .atMost(Duration.ofSeconds(5))
        .until(() -> !waiting.isDone() && freeNow());
  }

  /**
   * A waiter that died at the head of the queue (it asked once and never again) holds the lock up
   * only until its place expires; the next waiter then takes the free lock. Strict order (zero
   * patience), so that the dead waiter's place counts from the start; with some patience it counts
   * once it is that old.
   */
  @Test
  void aWaiterThatDiedLosesItsPlaceAndTheNextIsServed() {
    FencedLock next =
        lock(PostgresLockBackend.create(schema.dataSource()), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofSeconds(2));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(30));

    assertThat(acquired.isRight()).as("served once the dead waiter's place expired").isTrue();
    assertThat(dsl.fetchCount(waiters(), DSL.field(DSL.name("name")).eq(name)))
        .as("rows left, the expired place deleted by the grant")
        .isZero();
  }

  /**
   * Negative control: a dead waiter whose place never expires keeps the next waiter out of a free
   * lock for as long as it waits: the queue is what holds it up, and only the expiry frees it.
   */
  @Test
  void aPlaceThatNeverExpiresKeepsTheNextWaiterOutOfAFreeLock() {
    FencedLock next =
        lock(PostgresLockBackend.create(schema.dataSource()), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofHours(1));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(3));

    assertThat(acquired.isLeft()).as("still waiting behind the dead waiter").isTrue();
    assertThat(freeNow()).as("the lease itself is free").isTrue();
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

  /** A waiter that gives up leaves no place behind for the next to wait out. */
  @Test
  void aWaiterThatGivesUpLeavesTheQueue() {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    FencedLock holder = lock(backend, LeaseClock.system());
    FencedLock waiter = lock(backend, LeaseClock.system());
    HeldLock held = holder.tryAcquire(name, TTL).get();

    Either<NotAcquired, HeldLock> gaveUp = waiter.acquire(name, TTL, Duration.ofMillis(300));

    assertThat(gaveUp.isLeft()).isTrue();
    assertThat(gaveUp.getLeft().attempts()).as("it waited in the queue").isGreaterThan(1);
    assertThat(placesOf(name)).as("places left behind").isZero();
    held.release();
  }

  /**
   * The holder takes the lock; w1, w2 and w3 begin to wait in that order, each in the queue before
   * the next starts; the holder releases and asks again at once. Each records its name when served,
   * then releases.
   */
  private List<String> servedOrder(
      Function<javax.sql.DataSource, LockBackend> backends, Duration patience) throws Exception {
    List<String> served = new CopyOnWriteArrayList<>();
    FencedLock holder = lock(backends.apply(schema.dataSource()), new TimersNeverFire(), patience);
    HeldLock first = holder.tryAcquire(name, TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      FencedLock lock = lock(backends.apply(schema.dataSource()), new TimersNeverFire(), patience);
      int before = attemptsSoFar();
      threads.submit(() -> serve(lock, waiter, served));
      // In the queue (or, without one, refused once) before the next begins to wait.
      await().atMost(Duration.ofSeconds(10)).until(() -> attemptsSoFar() > before);
    }
    first.release();
    threads.submit(() -> serve(holder, "holder", served));
    return served;
  }

  private Void serve(FencedLock lock, String who, List<String> served) {
    lock.acquire(name, TTL, LONG_WAIT)
        .peek(
            held -> {
              served.add(who);
              held.release();
            });
    return null;
  }

  /** Refused attempts so far: places in the queue, or with no queue, this test's lost races. */
  private final List<Object> refusals = new CopyOnWriteArrayList<>();

  private int attemptsSoFar() {
    return placesOf(name) + refusals.size();
  }

  /** A holder takes the lock, a waiter on a clock whose timers never fire waits, it is released. */
  private Future<Either<NotAcquired, HeldLock>> waitOnTimersThatNeverFire(boolean listen) {
    PostgresLockBackend backend =
        PostgresLockBackend.create(
            schema.dataSource(), PostgresLockConfig.custom().listen(listen).build());
    closing.add(backend);
    FencedLock holder = lock(backend, LeaseClock.system());
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(backend, timers);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    // Refused once and waiting: for a wake-up (in the queue) or for a timer (polling).
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() > 0);
    assertThat(placesOf(name)).as("places in the queue").isEqualTo(listen ? 1 : 0);
    if (listen) {
      // The listener wakes every waiter once when it starts listening; let that wake-up be
      // answered first, so that only the release's notification can wake the waiter below.
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> backend.listening() && timers.waits() >= 2);
    }
    held.release();
    return waiting;
  }

  /**
   * A waiter queues behind a holder with a place of {@code place}, never asks again, and the holder
   * releases: the lease is free, the dead waiter's place is ahead of everyone.
   */
  private void deadWaiterAheadOfAFreeLock(Duration place) {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    FencedLock holder = lock(backend, LeaseClock.system());
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Option<FencingToken> refused =
        backend.tryAcquireInTurn(
            name, "dead#0000000000000000", TTL, "dead-waiter", place, Duration.ZERO);
    assertThat(refused.isEmpty()).as("the lease is held").isTrue();
    held.release();
    assertThat(freeNow()).isTrue();
    assertThat(placesOf(name)).as("the dead waiter's place").isOne();
  }

  private FencedLock lock(LockBackend backend, LeaseClock clock) {
    return lock(backend, clock, LockConfig.DEFAULT_PATIENCE);
  }

  private FencedLock lock(LockBackend backend, LeaseClock clock, Duration patience) {
    if (backend instanceof AutoCloseable c) {
      closing.add(c);
    }
    FencedLock lock =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .owner("p-" + UUID.randomUUID())
                .clock(clock)
                .patience(patience)
                .build());
    closing.add(lock);
    return lock;
  }

  /** {@code real} as a plain {@link LockBackend}, counting the races it lost. */
  private LockBackend plain(LockBackend real) {
    return new ForwardingLockBackend(real) {
      @Override
      public Option<FencingToken> tryAcquire(String n, String owner, Duration ttl) {
        Option<FencingToken> token = super.tryAcquire(n, owner, ttl);
        if (token.isEmpty()) {
          refusals.add(owner);
        }
        return token;
      }
    };
  }

  private boolean freeNow() {
    return PostgresLockBackend.create(schema.dataSource()).holder(name).isEmpty();
  }

  private static org.jooq.Table<?> waiters() {
    return DSL.table(
        DSL.name(PostgresLockConfig.DEFAULT_TABLE + PostgresLockConfig.WAITERS_SUFFIX));
  }

  /** Unexpired places in the queue of {@code lockName}. */
  private int placesOf(String lockName) {
    return dsl.fetchCount(
        waiters(),
        DSL.field(DSL.name("name")).eq(lockName),
        DSL.field(DSL.name("expires_at")).gt(DSL.field("clock_timestamp()")));
  }
}
