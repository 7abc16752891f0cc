package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Renewals and extensions that are out at the same time: a slow {@link HeldLock#extend} holds up
 * neither the watchdog's renewals of other leases nor those of its own lease, and when two renewals
 * of one lease are out at once the holder believes no more than whichever of them may have landed
 * last.
 */
class ConcurrentRenewalsTest {

  /** How long a backend call the test holds back waits at most before it gives up and fails. */
  private static final long HELD_BACK_SECONDS = 40;

  private final CountDownLatch endTest = new CountDownLatch(1);
  private FencedLock lock;

  @AfterEach
  void close() {
    endTest.countDown();
    if (lock != null) {
      lock.close();
    }
  }

  private static void hold(CountDownLatch latch) {
    try {
      if (!latch.await(HELD_BACK_SECONDS, TimeUnit.SECONDS)) {
        throw new BackendUnavailableException("the test never let this call go on", null);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new BackendUnavailableException("interrupted", e);
    }
  }

  /**
   * An extension of lease A whose backend call hangs (a user asking for a day on a slow connection)
   * while the watchdog keeps two leases: the watchdog goes on renewing lease B every second, and
   * lease A with its old length every 2 s. Before the fix the extension held A's renewal monitor
   * during its backend call, the watchdog's one thread waited on that monitor at A's next renewal,
   * and B's renewals stopped until B ran out.
   */
  @Test
  void aHangingExtensionDelaysNeitherAnotherLeasesRenewalsNorItsOwnLeasesWatchdog() {
    InMemoryLockBackend server = new InMemoryLockBackend();
    Duration day = Duration.ofDays(1);
    Map<String, AtomicInteger> renewals = new ConcurrentHashMap<>();
    CountDownLatch extensionSent = new CountDownLatch(1);
    lock =
        FencedLock.create(
            new ForwardingLockBackend(server) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
                if (ttl.equals(day)) {
                  extensionSent.countDown();
                  hold(endTest); // hangs until the test ends
                }
                renewals.computeIfAbsent(name, n -> new AtomicInteger()).incrementAndGet();
                return server.renew(name, owner, token, ttl);
              }
            },
            LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    HeldLock a = lock.tryAcquire("a", Duration.ofSeconds(6)).get();
    HeldLock b = lock.tryAcquire("b", Duration.ofSeconds(3)).get();

    CompletableFuture<Void> extension = CompletableFuture.runAsync(() -> a.extend(day));
    hold(extensionSent);
    int aBefore = count(renewals, "a");
    int bBefore = count(renewals, "b");

    await()
        .atMost(Duration.ofSeconds(30))
        .untilAsserted(
            () -> {
              assertThat(b.isHeld()).as("lease B is still held").isTrue();
              assertThat(count(renewals, "b"))
                  .as("lease B renewed while A's extension hangs")
                  .isGreaterThanOrEqualTo(bBefore + 3);
              assertThat(count(renewals, "a"))
                  .as("lease A renewed by the watchdog while its extension hangs")
                  .isGreaterThanOrEqualTo(aBefore + 2);
            });
    assertThat(a.isHeld()).as("lease A is still held").isTrue();
    assertThat(extension).isNotDone();
  }

  /**
   * A job thread whose interrupt flag is set (its executor was shut down during the job) keeps its
   * lease from its {@code finally} while a watchdog renewal is out: the renewal has landed, its
   * answer is still on the way. The keep must wait for that answer whatever the flag says. Before
   * the fix the interrupt ended the wait at once, the keep answered {@code KeptUntil}, and the late
   * answer then found the lease no longer held and released it: another node took it at once.
   */
  @Test
  void anInterruptedKeepStillWaitsForTheRenewalOutAndTheKeptLeaseStaysHeld() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    Duration ttl = Duration.ofSeconds(3);
    AtomicInteger watchdogRenewals = new AtomicInteger();
    CountDownLatch renewalLanded = new CountDownLatch(1);
    CountDownLatch answerRenewal = new CountDownLatch(1);
    lock =
        FencedLock.create(
            new ForwardingLockBackend(server) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration length) {
                boolean renewed = server.renew(name, owner, token, length);
                if (length.equals(ttl) && watchdogRenewals.incrementAndGet() == 1) {
                  renewalLanded.countDown();
                  hold(answerRenewal); // landed on the server, its answer held back
                }
                return renewed;
              }
            },
            LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    HeldLock held = lock.tryAcquire("job", ttl).get();
    hold(renewalLanded);

    CompletableFuture<Boolean> stillInterrupted = new CompletableFuture<>();
    CompletableFuture<ReleaseOutcome> kept = new CompletableFuture<>();
    Thread job =
        new Thread(
            () -> {
              Thread.currentThread().interrupt();
              try {
                kept.complete(held.releaseNoEarlierThan(Duration.ofMinutes(10)));
              } catch (RuntimeException e) {
                kept.completeExceptionally(e);
              }
              stillInterrupted.complete(Thread.currentThread().isInterrupted());
            },
            "interrupted-job");
    job.start();
    await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> kept.isDone() || job.getState() == Thread.State.WAITING);
    answerRenewal.countDown();
    job.join(TimeUnit.SECONDS.toMillis(30));

    assertThat(kept.get()).isInstanceOf(ReleaseOutcome.KeptUntil.class);
    assertThat(stillInterrupted.get()).as("the job's interrupt flag is set again").isTrue();
    await()
        .during(Duration.ofMillis(500))
        .atMost(Duration.ofSeconds(5))
        .until(() -> server.inspect("job").exists(lease -> !lease.isExpired()));
    assertThat(server.tryAcquire("job", "another node", ttl))
        .as("the kept lease is still held: another node cannot take it")
        .isEmpty();
  }

  /**
   * An extension to an hour sent while the watchdog's next renewal, with the old length, goes out
   * behind it and is answered after it. The watchdog's renewal carried the length it read before
   * the extension was confirmed; it must not set the lease's TTL back. Before the fix it did:
   * {@code ttl()} went back to 3 s and the watchdog renewed with 3 s from then on, undoing the
   * extension without a word.
   */
  @Test
  void aWatchdogRenewalAnsweredAfterAnExtensionDoesNotUndoIt() {
    InMemoryLockBackend server = new InMemoryLockBackend();
    Duration ttl = Duration.ofSeconds(3);
    Duration hour = Duration.ofHours(1);
    CountDownLatch watchdogSent = new CountDownLatch(1);
    CountDownLatch extended = new CountDownLatch(1);
    AtomicInteger watchdogWithTheHour = new AtomicInteger();
    AtomicInteger shortRenewals = new AtomicInteger();
    lock =
        FencedLock.create(
            new ForwardingLockBackend(server) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration length) {
                if (length.equals(hour) && extended.getCount() > 0) {
                  hold(watchdogSent); // the extension lands once the watchdog's renewal is out
                } else if (length.equals(ttl) && shortRenewals.incrementAndGet() == 1) {
                  watchdogSent.countDown();
                  hold(extended); // answered after the extension was confirmed
                } else if (length.equals(hour)) {
                  watchdogWithTheHour.incrementAndGet();
                }
                return server.renew(name, owner, token, length);
              }
            },
            LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    HeldLock held = lock.tryAcquire("report", ttl).get();

    held.extend(hour);
    extended.countDown();

    await()
        .atMost(Duration.ofSeconds(20))
        .untilAsserted(
            () ->
                assertThat(watchdogWithTheHour.get())
                    .as("the watchdog renews with the extended length")
                    .isPositive());
    assertThat(held.ttl()).isEqualTo(hour);
    assertThat(held.isHeld()).isTrue();
  }

  private static int count(Map<String, AtomicInteger> renewals, String name) {
    AtomicInteger n = renewals.get(name);
    return n == null ? 0 : n.get();
  }

  /**
   * Two extensions out at once, the shorter (2 s) sent first and landing last, the longer (1 h)
   * answered last: the server's lease ends 2 s after the shorter one landed. The holder must not
   * believe the hour because its answer came last, nor because it was sent last.
   */
  @Test
  void aShorterExtensionLandingAfterALongerOneLimitsWhatTheHolderBelieves() {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(clock);
    CountDownLatch shortSent = new CountDownLatch(1);
    CountDownLatch longLanded = new CountDownLatch(1);
    CountDownLatch shortAnswered = new CountDownLatch(1);
    lock =
        FencedLock.create(
            new ForwardingLockBackend(server) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
                if (ttl.equals(Duration.ofSeconds(2))) {
                  shortSent.countDown();
                  hold(longLanded); // delayed on the way: lands after the hour
                  return server.renew(name, owner, token, ttl);
                }
                boolean renewed = server.renew(name, owner, token, ttl);
                longLanded.countDown();
                hold(shortAnswered); // its answer is delayed until the 2 s one's came back
                return renewed;
              }
            },
            LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false).build());
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(30)).get();

    CompletableFuture<Void> shorter =
        CompletableFuture.runAsync(() -> held.extend(Duration.ofSeconds(2)));
    hold(shortSent);
    CompletableFuture<Void> longer =
        CompletableFuture.runAsync(() -> held.extend(Duration.ofHours(1)));
    shorter.join();
    shortAnswered.countDown();
    longer.join();
    clock.advance(Duration.ofMillis(2_001));

    assertThat(server.inspect("report").get().isExpired())
        .as("the server's lease ended with the 2 s extension, which landed last")
        .isTrue();
    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .as("so the holder does not believe the hour")
        .isInstanceOf(LeaseLostException.class);
  }

  /**
   * The same two extensions, the longer landing last: the server keeps the hour, and the holder,
   * which cannot tell the two orders apart, still believes the 2 s (the safe side). Then the next
   * extension alone brings the hour back.
   */
  @Test
  void aLongerExtensionLandingLastIsBelievedOnlyOnceNothingShorterIsOut() {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(clock);
    CountDownLatch shortLanded = new CountDownLatch(1);
    CountDownLatch longSent = new CountDownLatch(1);
    AtomicLong calls = new AtomicLong();
    lock =
        FencedLock.create(
            new ForwardingLockBackend(server) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
                if (calls.incrementAndGet() > 2) {
                  return server.renew(name, owner, token, ttl);
                }
                if (ttl.equals(Duration.ofSeconds(2))) {
                  boolean renewed = server.renew(name, owner, token, ttl);
                  shortLanded.countDown();
                  hold(longSent); // answered only once the hour is out too
                  return renewed;
                }
                longSent.countDown();
                hold(shortLanded);
                return server.renew(name, owner, token, ttl);
              }
            },
            LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false).build());
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(30)).get();

    CompletableFuture<Void> shorter =
        CompletableFuture.runAsync(() -> held.extend(Duration.ofSeconds(2)));
    CompletableFuture<Void> longer =
        CompletableFuture.runAsync(() -> held.extend(Duration.ofHours(1)));
    shorter.join();
    longer.join();

    assertThat(held.deadline().remaining()).isLessThanOrEqualTo(Duration.ofSeconds(2));
    held.extend(Duration.ofHours(1));
    assertThat(held.deadline().remaining()).isEqualTo(Duration.ofHours(1));
    clock.advance(Duration.ofMinutes(59));
    held.checkPointOfNoReturn(Duration.ZERO);
  }
}
