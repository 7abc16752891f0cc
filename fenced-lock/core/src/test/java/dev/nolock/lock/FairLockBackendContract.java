package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LockBackend;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Waiting for a held lock on a {@link FairLockBackend}, through {@link FencedLock}: callers with a
 * backend and a lock each (as separate processes have) are served in the order they began to wait,
 * a release wakes them, and a waiter that died holds the others up only until its place expires.
 * Each with the control that shows what happens without the protection. A backend's test extends
 * this class and supplies the backend and how to count its places; what only one backend has (its
 * wake-up channel failing, its clock, its schema) stays in that test.
 *
 * <p>Most tests run the waiters on a clock whose timers never fire ({@link TimersNeverFire}): a
 * waiter then asks again only when the backend wakes it, so the order and the wake-ups are the
 * backend's doing, not the luck of the jittered backoff.
 */
public abstract class FairLockBackendContract {

  protected static final Duration TTL = Duration.ofSeconds(30);
  protected static final Duration LONG_WAIT = Duration.ofMinutes(5);

  /** The lock every test of the contract waits for; unique per test. */
  protected final String name = "report-" + UUID.randomUUID();

  /** Closed after each test, last added first. */
  protected final List<AutoCloseable> closing = new CopyOnWriteArrayList<>();

  /** Runs the waiters; stopped first after each test, which ends waits whose timers never fire. */
  protected final ExecutorService threads = Executors.newCachedThreadPool();

  /** Refused attempts of backends seen as plain {@link LockBackend}s ({@link #plain}). */
  private final List<Object> refusals = new CopyOnWriteArrayList<>();

  private FairLockBackend observer;

  /**
   * A new backend on connections of its own, as a separate process has, that wakes its waiters. The
   * contract closes it after the test.
   */
  protected abstract FairLockBackend createBackend();

  /**
   * A backend of the same kind that cannot wake waiters (so that {@link FencedLock} polls without a
   * place): the control of the wake-up tests. The contract closes it after the test.
   */
  protected abstract FairLockBackend createBackendThatNeverWakes();

  /**
   * The places in the queue of {@code lockName}: those not expired, or not yet dropped where the
   * backend drops expired ones lazily.
   */
  protected abstract int placesOf(String lockName);

  /** Whether nothing of {@code lockName}'s queue is stored any more, expired places included. */
  protected abstract boolean queueGone(String lockName);

  /**
   * Whether {@code backend} is ready to wake waiters (listening, subscribed). By default its {@link
   * FairLockBackend#wakesWaiters()}.
   */
  protected boolean wakeUpsReady(FairLockBackend backend) {
    return backend.wakesWaiters();
  }

  @AfterEach
  void closeEverything() throws Exception {
    threads.shutdownNow();
    Exception failed = null;
    for (int i = closing.size() - 1; i >= 0; i--) {
      try {
        closing.get(i).close();
      } catch (Exception e) { // close the rest all the same
        if (failed == null) {
          failed = e;
        } else {
          failed.addSuppressed(e);
        }
      }
    }
    if (failed != null) {
      throw failed;
    }
  }

  /** {@link #createBackend()}, closed after the test. */
  protected final FairLockBackend newBackend() {
    return closedAfter(createBackend());
  }

  private FairLockBackend closedAfter(FairLockBackend backend) {
    if (backend instanceof AutoCloseable closeable) {
      closing.add(closeable);
    }
    return backend;
  }

  /**
   * Three waiters queue behind a holder; the holder releases and at once asks again. Each waiter is
   * served in the order it began to wait, and the holder, now the last to ask, comes after them.
   */
  @Test
  void waitersAreServedInTheOrderTheyBeganToWaitAndTheReleaserQueuesBehindThem() throws Exception {
    List<String> served = servedOrder(this::newBackend, Duration.ZERO);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * Negative control: the same backend seen only as a plain {@link LockBackend} (no queue, no
   * wake-ups), as before the queue. The holder asks again right after its release and takes the
   * lock ahead of all three waiters, whose timers have not fired.
   */
  @Test
  void withoutTheQueueTheReleaserTakesTheLockAgainAheadOfTheWaiters() throws Exception {
    List<String> served = servedOrder(() -> plain(newBackend()), Duration.ZERO);

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
    List<String> served = servedOrder(this::newBackend, LockConfig.DEFAULT_PATIENCE);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * The patience rule on the backend itself, with the waiters' own patience: three places queue
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

  /** What a newcomer (itself patient for a minute) gets right after the release. */
  private Option<FencingToken> newcomerAfterTheRelease(String lockName, Duration waitersPatience) {
    FairLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(lockName, "h#0", TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      assertThat(
              backend.tryAcquireInTurn(lockName, waiter + "#0", TTL, waiter, TTL, waitersPatience))
          .isEmpty();
    }
    assertThat(backend.release(lockName, "h#0", held)).isTrue();
    return backend.tryAcquireInTurn(
        lockName, "newcomer#0", TTL, "newcomer", TTL, LockConfig.MAX_PATIENCE);
  }

  /** A waiter whose timers never fire is woken by the release alone, and takes the lock. */
  @Test
  void aReleaseWakesAWaiterWhoseTimersNeverFire() throws Exception {
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(newBackend());

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("acquired after the release").isTrue();
  }

  /**
   * Negative control: on a backend that cannot wake waiters, the same waiter is never told: the
   * lease is free and it still waits. (It polls, without a place: a waiter nobody wakes must not
   * hold the queue up.)
   */
  @Test
  void onABackendThatCannotWakeTheSameWaiterIsNeverWoken() throws Exception {
    FairLockBackend backend = closedAfter(createBackendThatNeverWakes());
    assertThat(backend.wakesWaiters()).isFalse();
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(backend);

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(Duration.ofSeconds(3))
        .atMost(Duration.ofSeconds(5))
        .until(() -> !waiting.isDone() && freeNow());
  }

  /**
   * A waiter that died at the head of the queue (it asked once and never again) holds the lock up
   * only until its place expires; the next waiter then takes the free lock, and nothing of the
   * queue is left. Strict order (zero patience), so that the dead waiter's place counts from the
   * start; with some patience it counts once it is that old.
   */
  @Test
  void aWaiterThatDiedLosesItsPlaceAndTheNextIsServed() {
    FencedLock next = lock(newBackend(), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofSeconds(2));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(30));

    assertThat(acquired.isRight()).as("served once the dead waiter's place expired").isTrue();
    assertThat(queueGone(name)).as("the queue gone with the grant, the expired place too").isTrue();
  }

  /**
   * Negative control: a dead waiter whose place never expires keeps the next waiter out of a free
   * lock for as long as it waits: the queue is what holds it up, and only the expiry frees it.
   */
  @Test
  void aPlaceThatNeverExpiresKeepsTheNextWaiterOutOfAFreeLock() {
    FencedLock next = lock(newBackend(), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofHours(1));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(3));

    assertThat(acquired.isLeft()).as("still waiting behind the dead waiter").isTrue();
    assertThat(freeNow()).as("the lease itself is free").isTrue();
  }

  /** A waiter that gives up leaves no place behind for the next to wait out. */
  @Test
  void aWaiterThatGivesUpLeavesTheQueue() {
    FairLockBackend backend = newBackend();
    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    FencedLock waiter = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();

    Either<NotAcquired, HeldLock> gaveUp = waiter.acquire(name, TTL, Duration.ofMillis(300));

    assertThat(gaveUp.isLeft()).isTrue();
    assertThat(gaveUp.getLeft().attempts()).as("it waited in the queue").isGreaterThan(1);
    assertThat(placesOf(name)).as("places left behind").isZero();
    held.release();
  }

  /**
   * The holder takes the lock; w1, w2 and w3 begin to wait in that order, each in the queue (or,
   * without one, refused once) before the next starts; the holder releases and asks again at once.
   * Each records its name when served, then releases.
   */
  private List<String> servedOrder(Supplier<LockBackend> backends, Duration patience)
      throws Exception {
    List<String> served = new CopyOnWriteArrayList<>();
    FencedLock holder = lock(backends.get(), new TimersNeverFire(), patience);
    HeldLock first = holder.tryAcquire(name, TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      FencedLock lock = lock(backends.get(), new TimersNeverFire(), patience);
      int before = attemptsSoFar();
      threads.submit(() -> serve(lock, waiter, served));
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
  private int attemptsSoFar() {
    return placesOf(name) + refusals.size();
  }

  /** A holder takes the lock, a waiter on a clock whose timers never fire waits, it is released. */
  private Future<Either<NotAcquired, HeldLock>> waitOnTimersThatNeverFire(FairLockBackend backend) {
    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(backend, timers, LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    // Refused once and waiting: for a wake-up (in the queue) or for a timer (polling).
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() > 0);
    boolean queues = backend.wakesWaiters();
    assertThat(placesOf(name)).as("places in the queue").isEqualTo(queues ? 1 : 0);
    if (queues) {
      // The backend wakes every waiter once when its wake-ups start (nothing may have been heard
      // before); let that wake-up be answered first, so that only the release can wake it below.
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> wakeUpsReady(backend) && timers.waits() >= 2);
    }
    held.release();
    return waiting;
  }

  /**
   * A waiter queues behind a holder with a place of {@code place}, never asks again, and the holder
   * releases: the lease is free, the dead waiter's place is ahead of everyone.
   */
  protected final void deadWaiterAheadOfAFreeLock(Duration place) {
    FairLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(name, "h#0", TTL).get();
    assertThat(backend.tryAcquireInTurn(name, "dead#0", TTL, "dead-waiter", place, Duration.ZERO))
        .as("the lease is held")
        .isEmpty();
    assertThat(backend.release(name, "h#0", held)).isTrue();
    assertThat(freeNow()).isTrue();
    assertThat(placesOf(name)).as("the dead waiter's place").isOne();
  }

  /** A lock for one caller (an owner of its own) on {@code backend}, closed after the test. */
  protected final FencedLock lock(LockBackend backend, LeaseClock clock, Duration patience) {
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

  /** Whether nobody holds the lease on this test's lock now. */
  protected final synchronized boolean freeNow() {
    if (observer == null) {
      observer = newBackend();
    }
    return observer.holder(name).isEmpty();
  }
}
