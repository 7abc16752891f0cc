package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.CapturedStderr;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class FencedLockTest {

  private static final Duration TTL = Duration.ofSeconds(3);

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final CompletableFuture<LostLease> lost = new CompletableFuture<>();
  private final InMemoryLockBackend backend = new InMemoryLockBackend();
  private final FencedLock lock = correctness(backend);
  private final FencedLock other = correctness(backend);

  @AfterEach
  void close() {
    lock.close();
    other.close();
  }

  private FencedLock correctness(LockBackend backend) {
    return FencedLock.create(
        backend,
        LockConfig.custom(LockPurpose.CORRECTNESS)
            .metrics(registry, "test")
            .onLeaseLost(lost::complete)
            .build());
  }

  @Test
  void aCorrectnessLockHandsOutTheLeaseForTheFence() {
    HeldLock held = lock.tryAcquire("invoice-1", TTL).get();

    assertThat(held.lease().name()).isEqualTo("invoice-1");
    assertThat(held.lease().owner())
        .isEqualTo(held.owner())
        .startsWith(lock.config().owner() + "#");
    assertThat(GrantOwner.processOf(held.owner())).isEqualTo(lock.config().owner());
    assertThat(held.lease().token()).isEqualTo(FencingToken.of(1));
  }

  @Test
  void heldListsTheLocksThisInstanceHoldsUntilTheyAreReleased() {
    assertThat(lock.held()).isEmpty();
    HeldLock a = lock.tryAcquire("held-a", TTL).get();
    HeldLock b = lock.tryAcquire("held-b", TTL).get();
    HeldLock theirs = other.tryAcquire("held-c", TTL).get();

    assertThat(lock.held()).containsExactlyInAnyOrder(a, b);
    a.release();
    assertThat(lock.held()).containsExactly(b);
    assertThat(other.held()).containsExactly(theirs);
  }

  @Test
  void anEfficiencyLockRefusesToHandOutAFencingLease() {
    try (FencedLock efficiency =
        FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.EFFICIENCY))) {
      HeldLock held = efficiency.tryAcquire("cache-refresh", TTL).get();

      assertThatThrownBy(held::lease)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("LockPurpose.CORRECTNESS");
    }
  }

  @Test
  void anotherOwnerIsRefusedAndTheConflictIsCounted() {
    lock.tryAcquire("invoice-1", TTL).get();

    assertThat(other.tryAcquire("invoice-1", TTL).isEmpty()).isTrue();
    assertThat(registry.get("nolock.conflicts").counter().count()).isEqualTo(1);
  }

  @Test
  void acquireWaitsWithBackoffUntilTheHolderReleases() {
    HeldLock first = lock.tryAcquire("invoice-1", TTL).get();
    CompletableFuture<Either<NotAcquired, HeldLock>> waiting =
        CompletableFuture.supplyAsync(
            () -> other.acquire("invoice-1", TTL, Duration.ofSeconds(20)));
    await().until(() -> registry.get("nolock.conflicts").counter().count() >= 2);

    first.release();

    HeldLock second = waiting.join().get();
    assertThat(second.lease().token()).isEqualTo(FencingToken.of(2));
    assertThat(registry.find("nolock.acquire.wait").tag("outcome", "acquired").timer().count())
        .isEqualTo(2);
  }

  @Test
  void acquireGivesUpAfterMaxWaitWithAValue() {
    lock.tryAcquire("invoice-1", TTL).get();

    Either<NotAcquired, HeldLock> result = other.acquire("invoice-1", TTL, Duration.ofMillis(300));

    assertThat(result.getLeft().attempts()).isGreaterThan(1);
    assertThat(result.getLeft().waited()).isLessThan(Duration.ofSeconds(2));
    assertThat(registry.find("nolock.acquire.wait").tag("outcome", "gave_up").timer().count())
        .isEqualTo(1);
  }

  @Test
  void theWatchdogRenewsSoTheLeaseOutlivesItsTtl() {
    Duration ttl = Duration.ofMillis(300);
    HeldLock held = lock.tryAcquire("invoice-1", ttl).get();

    await()
        .during(Duration.ofMillis(1_200))
        .atMost(Duration.ofSeconds(3))
        .until(() -> held.isHeld() && !backend.inspect("invoice-1").get().isExpired());
    assertThat(registry.get("nolock.renewals").counter().count()).isGreaterThanOrEqualTo(3);
    assertThat(other.tryAcquire("invoice-1", ttl).isEmpty()).isTrue();
  }

  /**
   * The usual work shape, {@code try (HeldLock held = ...)} around {@code checkPointOfNoReturn},
   * releases a lease after it was lost: whoever asks afterwards (a leader elector deciding whether
   * to halt) must still learn that it was lost, not that it was given back.
   */
  @Test
  void aLostLeaseReleasedAfterwardsStillSaysItWasLost() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    try (FencedLock a = correctness(server)) {
      HeldLock held = a.tryAcquire("invoice-1", Duration.ofMillis(600)).get();
      serverClock.advance(Duration.ofSeconds(1));
      lost.get(10, TimeUnit.SECONDS);

      held.release();

      assertThat(held.isLost()).as("lost, then released: still lost").isTrue();
      assertThat(held.isHeld()).isFalse();
      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("was released");
      held.release(); // idempotent
      assertThat(held.isLost()).isTrue();
    }
  }

  @Test
  void aRefusedRenewalLosesTheLeaseAtOnceAndTheNextCheckThrows() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    try (FencedLock a = correctness(server);
        FencedLock b = correctness(server)) {
      HeldLock held = a.tryAcquire("invoice-1", Duration.ofMillis(600)).get();
      serverClock.advance(Duration.ofSeconds(1)); // the server expires A's lease (A was paused)
      HeldLock taken = b.tryAcquire("invoice-1", Duration.ofSeconds(30)).get();

      LostLease lostLease = lost.get(10, TimeUnit.SECONDS);

      assertThat(lostLease.name()).isEqualTo("invoice-1");
      assertThat(lostLease.reason()).contains("refused the renewal");
      assertThat(held.isLost()).isTrue();
      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(LeaseLostException.class)
          .hasMessageContaining("Stop writing");
      assertThat(server.inspect("invoice-1").get().holder().get().owner())
          .as("A's renewal did not extend B's lease")
          .isEqualTo(taken.owner());
      assertThat(taken.isHeld()).isTrue();
      assertThat(registry.get("nolock.lease.losses").counter().count()).isEqualTo(1);
      assertThat(registry.get("nolock.renewal.failures").counter().count())
          .isGreaterThanOrEqualTo(1);
    }
  }

  /**
   * The lease-lost hook runs on the watchdog, a background component: a checked exception it throws
   * is the hook's failure, logged with the lease it was told of, and the lock goes on: it keeps
   * renewing the other lease, tells the hook of the next loss too, and still hands out leases.
   */
  @Test
  void aLeaseLostHookThatThrowsACheckedExceptionIsLoggedAndTheLockGoesOn() throws Exception {
    Set<String> refused = ConcurrentHashMap.newKeySet();
    LockBackend refusing =
        new ForwardingLockBackend(backend) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            return !refused.contains(name) && backend.renew(name, owner, token, ttl);
          }
        };
    List<LostLease> told = new CopyOnWriteArrayList<>();
    try (CapturedStderr err = new CapturedStderr();
        FencedLock a =
            FencedLock.create(
                refusing,
                LockConfig.custom(LockPurpose.CORRECTNESS)
                    .metrics(registry, "test")
                    .onLeaseLost(
                        lostLease -> {
                          told.add(lostLease);
                          throw new IOException("the pager is down");
                        })
                    .build())) {
      HeldLock first = a.tryAcquire("invoice-1", Duration.ofMillis(600)).get();
      HeldLock second = a.tryAcquire("invoice-2", Duration.ofMillis(600)).get();

      refused.add("invoice-1");
      await().atMost(Duration.ofSeconds(10)).until(() -> told.size() == 1);
      double renewalsAtTheFailure = registry.get("nolock.renewals").counter().count();
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> registry.get("nolock.renewals").counter().count() > renewalsAtTheFailure);
      assertThat(second.isHeld()).as("the other lease, still renewed").isTrue();

      refused.add("invoice-2");
      await().atMost(Duration.ofSeconds(10)).until(() -> told.size() == 2);

      assertThat(told).extracting(LostLease::name).containsExactly("invoice-1", "invoice-2");
      assertThat(first.isLost()).isTrue();
      assertThat(second.isLost()).isTrue();
      assertThat(a.tryAcquire("invoice-3", TTL).isDefined()).as("still hands out leases").isTrue();
      assertThat(err.lines())
          .filteredOn(line -> line.contains("lease-lost callback"))
          .hasSize(2)
          .allMatch(line -> line.contains("ERROR"), "logged as an error");
      assertThat(err.lines())
          .filteredOn(line -> line.contains("IOException: the pager is down"))
          .hasSize(2);
    }
  }

  /**
   * A lease-lost hook that waits (for the work it stops, say) and is interrupted there by a
   * shutdown: the interrupt is the thread's, not the hook's. The lock logs the hook's {@code
   * InterruptedException} like any failure, but the thread that called extend leaves with its
   * interrupt flag set, so its own loop sees the shutdown. The negative control is the plain
   * catch-all: it cleared the flag.
   */
  @Test
  void anInterruptThatEndsTheLeaseLostHookIsNotLost() throws Exception {
    LockBackend refusing =
        new ForwardingLockBackend(backend) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            return false;
          }
        };
    CountDownLatch workStopped = new CountDownLatch(1); // never: the shutdown comes first
    List<LostLease> told = new CopyOnWriteArrayList<>();
    try (FencedLock a =
        FencedLock.create(
            refusing,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .autoRenew(false)
                .onLeaseLost(
                    lostLease -> {
                      told.add(lostLease);
                      workStopped.await();
                    })
                .build())) {
      HeldLock held = a.tryAcquire("invoice-1", TTL).get();

      Thread.currentThread().interrupt(); // the shutdown, arriving while the hook waits
      boolean interruptedAfter;
      try {
        assertThatThrownBy(() -> held.extend(TTL)).isInstanceOf(LeaseLostException.class);
      } finally {
        interruptedAfter = Thread.interrupted(); // and clears it for the next test
      }

      assertThat(told).as("the hook was told, and its wait interrupted").hasSize(1);
      assertThat(interruptedAfter)
          .as("the caller's thread still has its interrupt flag after the hook threw it")
          .isTrue();
    }
  }

  @Test
  void whenRenewalsFailTheLeaseIsLostAtItsDeadline() throws Exception {
    AtomicBoolean down = new AtomicBoolean();
    LockBackend flaky =
        new ForwardingLockBackend(backend) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            if (down.get()) {
              throw new IllegalStateException("connection refused");
            }
            return backend.renew(name, owner, token, ttl);
          }
        };
    try (FencedLock a = correctness(flaky)) {
      HeldLock held = a.tryAcquire("invoice-1", Duration.ofMillis(600)).get();
      down.set(true);

      LostLease lostLease = lost.get(10, TimeUnit.SECONDS);

      assertThat(lostLease.reason()).contains("ran out");
      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(LeaseLostException.class);
    }
  }

  @Test
  void aHolderWithoutRenewalStopsItselfAtThePointOfNoReturn() {
    ManualLeaseClock clock = new ManualLeaseClock();
    try (FencedLock manual =
        FencedLock.create(
            new InMemoryLockBackend(clock),
            LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false).build())) {
      HeldLock held = manual.tryAcquire("invoice-1", Duration.ofSeconds(3)).get();
      held.checkPointOfNoReturn(Duration.ofMillis(50));

      clock.advance(Duration.ofMillis(2_900)); // a GC pause: 100 ms left, margin 100 ms

      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ofMillis(50)))
          .isInstanceOf(LeaseLostException.class)
          .hasMessageContaining("Point of no return");
    }
  }

  /**
   * A pause longer than the lease, after which the holder's own release comes before any renewal
   * notices: the lease ran out while held, so it was lost, not given back.
   */
  @Test
  void aLeaseReleasedAfterItRanOutSaysItWasLost() {
    ManualLeaseClock clock = new ManualLeaseClock();
    try (FencedLock manual =
        FencedLock.create(
            new InMemoryLockBackend(clock),
            LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false).build())) {
      HeldLock held = manual.tryAcquire("invoice-1", Duration.ofSeconds(3)).get();
      clock.advance(Duration.ofSeconds(4)); // a pause longer than the lease

      held.release();

      assertThat(held.isLost()).as("ran out while held, then released: lost").isTrue();
    }
  }

  @Test
  void withLockRunsTheWorkWithTheLockAndReleasesIt() {
    Either<NotAcquired, Long> token =
        lock.withLock("invoice-1", TTL, Duration.ZERO, held -> held.lease().token().value());
    assertThat(token.get()).isEqualTo(1L);
    assertThat(other.tryAcquire("invoice-1", TTL).isDefined())
        .as("released after the work")
        .isTrue();
  }

  @Test
  void withLockReleasesWhenTheWorkThrows() {
    assertThatThrownBy(
            () ->
                lock.withLock(
                    "invoice-1",
                    TTL,
                    Duration.ZERO,
                    held -> {
                      throw new IllegalStateException("work failed");
                    }))
        .hasMessage("work failed");
    assertThat(other.tryAcquire("invoice-1", TTL).isDefined()).isTrue();
  }

  @Test
  void withLockRethrowsACheckedExceptionUnchangedAfterReleasing() {
    java.io.IOException failure = new java.io.IOException("the invoice service refused");
    AtomicBoolean heldDuringWork = new AtomicBoolean();

    assertThatThrownBy(
            () ->
                lock.withLock(
                    "invoice-1",
                    TTL,
                    Duration.ZERO,
                    held -> {
                      heldDuringWork.set(other.tryAcquire("invoice-1", TTL).isEmpty());
                      throw failure;
                    }))
        .isSameAs(failure);
    assertThat(heldDuringWork).as("the lock was held while the work ran").isTrue();
    assertThat(other.tryAcquire("invoice-1", TTL).isDefined())
        .as("released before the exception reached the caller")
        .isTrue();
  }

  @Test
  void withLockDeclaresTheWorksCheckedException() {
    // A caller's own checked exception type flows through withLock's signature: this compiles
    // only because withLock declares the work's X, and the caller handles exactly that type.
    java.util.concurrent.TimeoutException caught = null;
    try {
      lock.withLock(
          "invoice-1",
          TTL,
          Duration.ZERO,
          held -> {
            throw new java.util.concurrent.TimeoutException("payment gateway timed out");
          });
    } catch (java.util.concurrent.TimeoutException expected) {
      caught = expected;
    }
    assertThat(caught).hasMessage("payment gateway timed out");
    assertThat(other.tryAcquire("invoice-1", TTL).isDefined()).isTrue();
  }

  @Test
  void withLockRefusesNullWorkWithAnIllegalArgumentException() {
    assertThatThrownBy(
            () -> lock.withLock("invoice-1", TTL, Duration.ZERO, (LockedWork<String, ?>) null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("work");
  }

  @Test
  void aPatienceOutsideZeroToAMinuteIsRefusedSayingWhatToPass() {
    LockConfig.Builder builder = LockConfig.custom(LockPurpose.EFFICIENCY);
    assertThatThrownBy(() -> builder.patience(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between zero (strict arrival order) and PT1M")
        .hasMessageContaining("Duration.ofMillis(20)");
    assertThatThrownBy(() -> builder.patience(Duration.ofMinutes(2)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("PT2M");
    assertThat(builder.patience(Duration.ZERO).build().patience()).isZero();
    assertThat(LockConfig.ofDefaults(LockPurpose.EFFICIENCY).patience())
        .isEqualTo(LockConfig.DEFAULT_PATIENCE);
  }

  @Test
  void aReleasedLockRefusesFurtherWritesAndReleaseIsIdempotent() {
    HeldLock held = lock.tryAcquire("invoice-1", TTL).get();
    held.release();
    held.release();

    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("released");
    assertThat(registry.get("nolock.lease.held").timer().count()).isEqualTo(1);
  }

  @Test
  void closeReleasesEveryHeldLease() {
    lock.tryAcquire("a", TTL).get();
    lock.tryAcquire("b", TTL).get();
    lock.close();

    assertThat(other.tryAcquire("a", TTL).isDefined()).isTrue();
    assertThat(other.tryAcquire("b", TTL).isDefined()).isTrue();
    assertThatThrownBy(() -> lock.tryAcquire("c", TTL)).hasMessageContaining("closed");
  }

  @Test
  void badCallsAreRefusedWithAFix() {
    assertThatThrownBy(() -> lock.tryAcquire("", TTL)).hasMessageContaining("lock name is blank");
    assertThatThrownBy(() -> lock.tryAcquire("x".repeat(300), TTL))
        .hasMessageContaining("more than 255");
    assertThatThrownBy(() -> lock.tryAcquire("a", Duration.ZERO)).hasMessageContaining("outside");
    assertThatThrownBy(() -> lock.tryAcquire("a", Duration.ofMillis(-10)))
        .hasMessageContaining("outside");
    assertThatThrownBy(() -> lock.tryAcquire("a", Duration.ofDays(8)))
        .hasMessageContaining("outside");
    assertThatThrownBy(() -> lock.acquire("a", TTL, Duration.ofSeconds(-1)))
        .hasMessageContaining("maxWait");
    assertThatThrownBy(() -> LockConfig.custom(null)).hasMessageContaining("Say why you lock");
    try (FencedLock slowRenewal =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .renewalInterval(Duration.ofSeconds(2))
                .build())) {
      assertThatThrownBy(() -> slowRenewal.tryAcquire("a", TTL))
          .hasMessageContaining("not comfortably below the TTL");
    }
    try (FencedLock bigMargin =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .safetyMargin(Duration.ofSeconds(2))
                .build())) {
      // Refused where it matters, at the point of no return: a holder that never checks it may
      // hold a lease this short (FencedLockForJobsTest).
      HeldLock held = bigMargin.tryAcquire("a", TTL).get();
      assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("safety margin");
    }
  }

  @Test
  void aReleaseThatFailsNeverTurnsFinishedWorkIntoAFailure() {
    InMemoryLockBackend server = new InMemoryLockBackend();
    LockBackend releaseFails =
        new ForwardingLockBackend(server) {
          @Override
          public boolean release(String name, String owner, FencingToken token) {
            server.release(name, owner, token); // applied, but the answer is lost
            throw new BackendUnavailableException("connection reset", null);
          }
        };
    try (FencedLock failing = correctness(releaseFails)) {
      Either<NotAcquired, String> result =
          failing.withLock("invoice-1", TTL, Duration.ZERO, held -> "charged");

      assertThat(result.get()).isEqualTo("charged");
      assertThat(registry.get("nolock.release.failures").counter().count()).isEqualTo(1);
    }
  }

  @Test
  void aGrantThatArrivesAfterItsWholeTtlIsNotHandedOut() {
    ManualLeaseClock holderClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend();
    LockBackend slow =
        new ForwardingLockBackend(server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            Option<FencingToken> granted = server.tryAcquire(name, owner, ttl);
            holderClock.advance(ttl); // the answer took the whole TTL to come back
            return granted;
          }
        };
    try (FencedLock lateLock =
        FencedLock.create(
            slow,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .clock(holderClock)
                .autoRenew(false)
                .metrics(registry, "test")
                .build())) {
      assertThat(lateLock.tryAcquire("invoice-1", TTL)).as("a grant with no time left").isEmpty();
      assertThat(server.holder("invoice-1")).as("given back at once").isEmpty();
    }
  }

  @Test
  void aRenewalThatLandsAfterTheHolderLostTheLeaseIsGivenBackAtOnce() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend(new ManualLeaseClock()); // never expires
    CountDownLatch lostHere = new CountDownLatch(1);
    AtomicBoolean firstRenewal = new AtomicBoolean(true);
    LockBackend slowRenewal =
        new ForwardingLockBackend(server) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            if (firstRenewal.getAndSet(false)) {
              try {
                // The renewal is on its way while the holder's deadline passes.
                lostHere.await(10, TimeUnit.SECONDS);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              }
            }
            return server.renew(name, owner, token, ttl);
          }
        };
    try (FencedLock late =
        FencedLock.create(
            slowRenewal,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .renewalInterval(Duration.ofMillis(100))
                .onLeaseLost(lost -> lostHere.countDown())
                .build())) {
      HeldLock held = late.tryAcquire("invoice-1", Duration.ofMillis(300)).get();

      assertThat(lostHere.await(10, TimeUnit.SECONDS)).as("the holder lost the lease").isTrue();
      assertThat(held.isLost()).isTrue();
      await()
          .atMost(Duration.ofSeconds(5))
          .untilAsserted(
              () ->
                  assertThat(server.holder("invoice-1"))
                      .as("the lease the late renewal extended, which nobody holds, is freed")
                      .isEmpty());
    }
  }

  /**
   * close() while a grant is on its way (FL-A): the grant that comes back after close() returned is
   * released and not handed out, since nobody would renew or release it.
   */
  @Test
  void aGrantThatComesBackAfterCloseIsReleasedAndNotHandedOut() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch inAcquire = new CountDownLatch(1);
    CountDownLatch mayReturn = new CountDownLatch(1);
    LockBackend slow =
        new ForwardingLockBackend(server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            inAcquire.countDown();
            awaitOrFail(mayReturn);
            return super.tryAcquire(name, owner, ttl);
          }
        };
    FencedLock closing =
        FencedLock.create(slow, LockConfig.custom(LockPurpose.CORRECTNESS).build());
    CompletableFuture<Option<HeldLock>> acquired =
        CompletableFuture.supplyAsync(() -> closing.tryAcquire("invoice-1", TTL));
    assertThat(inAcquire.await(10, TimeUnit.SECONDS)).isTrue();
    closing.close();
    mayReturn.countDown();

    assertThatThrownBy(() -> acquired.get(10, TimeUnit.SECONDS))
        .as("no lease handed out by a closed lock")
        .hasCauseInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed while acquiring");
    assertThat(server.holder("invoice-1")).as("the grant was released").isEmpty();
  }

  /**
   * A grant that registers while close() is releasing the other leases (FL-B): close() has passed
   * over the list of held leases and will shut the timers down, so a lease handed out now would
   * stay held, renewed by nobody and released by nobody. It is released and not handed out.
   */
  @Test
  void aGrantThatRegistersWhileCloseReleasesTheOthersIsReleasedAndNotHandedOut() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch inAcquire = new CountDownLatch(1);
    CountDownLatch mayReturn = new CountDownLatch(1);
    CountDownLatch inRelease = new CountDownLatch(1);
    CountDownLatch releaseMayReturn = new CountDownLatch(1);
    LockBackend slow =
        new ForwardingLockBackend(server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            if (name.equals("invoice-2")) {
              inAcquire.countDown();
              awaitOrFail(mayReturn);
            }
            return super.tryAcquire(name, owner, ttl);
          }

          @Override
          public boolean release(String name, String owner, FencingToken token) {
            if (name.equals("invoice-1")) {
              inRelease.countDown();
              awaitOrFail(releaseMayReturn);
            }
            return super.release(name, owner, token);
          }
        };
    FencedLock closing =
        FencedLock.create(slow, LockConfig.custom(LockPurpose.CORRECTNESS).build());
    closing.tryAcquire("invoice-1", TTL).get();
    CompletableFuture<Option<HeldLock>> acquired =
        CompletableFuture.supplyAsync(() -> closing.tryAcquire("invoice-2", TTL));
    assertThat(inAcquire.await(10, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<Void> closed = CompletableFuture.runAsync(closing::close);
    assertThat(inRelease.await(10, TimeUnit.SECONDS)).as("close() releases invoice-1").isTrue();
    mayReturn.countDown(); // the grant of invoice-2 registers while close() is past the list
    Object outcome;
    try {
      outcome = acquired.get(10, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      outcome = e.getCause();
    }
    releaseMayReturn.countDown();
    closed.get(10, TimeUnit.SECONDS);

    assertThat(outcome)
        .as("a closed lock hands out no lease (a lease nobody renews nor releases)")
        .isInstanceOf(IllegalStateException.class);
    assertThat(server.holder("invoice-2")).as("the grant was released").isEmpty();
  }

  private static void awaitOrFail(CountDownLatch latch) {
    try {
      // Bounded only so that a missing step fails the test instead of hanging it.
      if (!latch.await(10, TimeUnit.SECONDS)) {
        throw new AssertionError("the test never let the call return");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
