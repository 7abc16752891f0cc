package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
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
import java.util.concurrent.Semaphore;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting for a held lock on PostgreSQL: callers in separate processes (one backend and one {@link
 * FencedLock} each) are served in the order they began to wait, a release wakes them through
 * {@code LISTEN}/{@code NOTIFY}, and a waiter that died holds the others up only until its place
 * expires. Each with the control that shows what happens without the protection.
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
   * Within the patience the releaser may take the lock again ahead of the waiters: a patience of
   * a minute, which none of them has waited, lets it do so. Listening is off, so that the first
   * waiter is not woken to race it: with strict order the releaser would queue and nobody would be
   * served.
   */
  @Test
  void withinThePatienceTheReleaserMayGoAheadOfTheWaiters() throws Exception {
    List<String> served =
        servedOrder(
            pool ->
                PostgresLockBackend.create(
                    pool, PostgresLockConfig.custom().listen(false).build()),
            LockConfig.MAX_PATIENCE);

    await().atMost(Duration.ofSeconds(30)).until(() -> !served.isEmpty());
    assertThat(served.get(0)).isEqualTo("holder");
  }

  /**
   * A waiter whose timers never fire is woken by the release alone: the notification reaches it
   * and it takes the lock.
   */
  @Test
  void aReleaseWakesAWaiterWhoseTimersNeverFire() throws Exception {
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(true);

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("acquired after the release").isTrue();
  }

  /**
   * Negative control: with listening off, the same waiter is never told: the lease is free and the
   * waiter still waits.
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
    assertThat(placesOf(name)).as("places left, expired ones cleared by the grant").isZero();
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
   * the next starts; the holder releases and asks again at once. Each records its name when
   * served, then releases.
   */
  private List<String> servedOrder(
      Function<javax.sql.DataSource, LockBackend> backends, Duration patience) throws Exception {
    List<String> served = new CopyOnWriteArrayList<>();
    FencedLock holder = lock(backends.apply(schema.dataSource()), new TimersNeverFire(), patience);
    HeldLock first = holder.tryAcquire(name, TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      FencedLock lock =
          lock(backends.apply(schema.dataSource()), new TimersNeverFire(), patience);
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
    FencedLock waiter = lock(backend, new TimersNeverFire());
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    await().atMost(Duration.ofSeconds(10)).until(() -> placesOf(name) == 1);
    held.release();
    return waiting;
  }

  /**
   * A waiter queues behind a holder with a place of {@code place}, never asks again, and the
   * holder releases: the lease is free, the dead waiter's place is ahead of everyone.
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
    return new LockBackend() {
      @Override
      public Option<FencingToken> tryAcquire(String n, String owner, Duration ttl) {
        Option<FencingToken> token = real.tryAcquire(n, owner, ttl);
        if (token.isEmpty()) {
          refusals.add(owner);
        }
        return token;
      }

      @Override
      public boolean renew(String n, String owner, FencingToken token, Duration ttl) {
        return real.renew(n, owner, token, ttl);
      }

      @Override
      public boolean release(String n, String owner, FencingToken token) {
        return real.release(n, owner, token);
      }

      @Override
      public Option<LeaseHolder> holder(String n) {
        return real.holder(n);
      }
    };
  }

  private boolean freeNow() {
    return PostgresLockBackend.create(schema.dataSource()).holder(name).isEmpty();
  }

  private int placesOf(String lockName) {
    return dsl.fetchCount(
        DSL.table(DSL.name(PostgresLockConfig.DEFAULT_TABLE + PostgresLockConfig.WAITERS_SUFFIX)),
        DSL.field(DSL.name("name")).eq(lockName),
        DSL.field(DSL.name("expires_at")).gt(DSL.field("clock_timestamp()")));
  }

  /**
   * A clock whose timers never fire: a backoff sleeps until the thread is interrupted, and a wait
   * for a wake-up ends only with the wake-up. Time itself runs as usual.
   */
  private static final class TimersNeverFire implements LeaseClock {
    @Override
    public long nanoTime() {
      return System.nanoTime();
    }

    @Override
    public void sleep(Duration duration) throws InterruptedException {
      new Semaphore(0).acquire();
    }

    @Override
    public boolean await(Semaphore signal, Duration duration) throws InterruptedException {
      signal.acquire();
      return true;
    }
  }
}
