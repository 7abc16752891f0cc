package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * The contract every {@link LockBackend} passes. A backend's test extends this class and supplies
 * the backend and a backend-native {@link #peek} of its stored state; users run it against their
 * own backends too.
 *
 * <p>The suite can fail: a backend that always grants fails the refusal tests and the concurrency
 * fuzz, where 8 threads do a deliberately non-atomic read-increment-write of a plain counter under
 * the lock (testkit's own tests show it).
 */
public abstract class LockBackendContract {

  /** Acquisitions the fuzz test makes in all, across its threads. */
  protected static final int FUZZ_ACQUISITIONS = 400;

  /** Threads of the fuzz test. */
  protected static final int FUZZ_THREADS = 8;

  /** The backend under test. */
  protected abstract LockBackend backend();

  /**
   * The backend's stored lease of {@code name}, read natively, or empty when none is stored. A free
   * lease may be returned as empty or as an {@link ObservedLease} without a holder; an expired one
   * must name its holder with a zero {@code waitLeft} (or be empty, where the server deletes an
   * expired lease).
   */
  protected abstract Option<ObservedLease> peek(String name);

  /** A TTL no test step outlasts. */
  protected Duration ttl() {
    return Duration.ofSeconds(10);
  }

  /** A TTL the expiry tests wait out; short, but long enough for a round trip on a busy machine. */
  protected Duration shortTtl() {
    return Duration.ofMillis(600);
  }

  private final String prefix = "contract-" + UUID.randomUUID().toString().substring(0, 8) + "-";

  protected String name(String test) {
    return prefix + test;
  }

  @Test
  void aSecondAcquireIsRefusedWhileHeld() {
    String name = name("held");
    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();

    assertThat(backend().tryAcquire(name, "B", ttl()).isEmpty()).as("another owner").isTrue();
    // The holder's own grant asking again (a retry after "unknown") grants nothing new: a backend
    // may refuse it or hand back the same token, never a new one.
    Option<FencingToken> again = backend().tryAcquire(name, "A", ttl());
    assertThat(again.toJavaOptional())
        .as("the holding grant asking again")
        .isIn(Optional.empty(), Optional.of(a));
    assertThat(liveHolder(name)).contains(new LeaseHolder("A", a));
  }

  @Test
  void tokensStrictlyIncreaseAcrossHoldersAndReleases() {
    String name = name("rising");
    List<FencingToken> tokens = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      String owner = i % 2 == 0 ? "A" : "B";
      FencingToken token = backend().tryAcquire(name, owner, ttl()).get();
      tokens.add(token);
      assertThat(backend().release(name, owner, token)).isTrue();
    }
    assertThat(tokens).isSortedAccordingTo(FencingToken::compareTo).doesNotHaveDuplicates();
  }

  @Test
  void tokensIncreaseAfterAnExpiry() {
    String name = name("expiry");
    FencingToken first = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);

    FencingToken second = backend().tryAcquire(name, "B", ttl()).get();

    assertThat(second.isNewerThan(first)).isTrue();
  }

  @Test
  void aStaleReleaseDoesNotFreeTheNextHolder() {
    String name = name("stale-release");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);
    FencingToken b = backend().tryAcquire(name, "B", ttl()).get();

    assertThat(backend().release(name, "A", a)).as("A's late release").isFalse();

    assertThat(liveHolder(name)).contains(new LeaseHolder("B", b));
    assertThat(backend().tryAcquire(name, "C", ttl()).isEmpty()).isTrue();
  }

  @Test
  void releaseIsIdempotentAndFreesTheLease() {
    String name = name("release");
    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();

    assertThat(backend().release(name, "A", a)).isTrue();
    assertThat(backend().release(name, "A", a)).isFalse();
    assertThat(backend().tryAcquire(name, "B", ttl()).isDefined()).isTrue();
  }

  @Test
  void releaseWithAnotherOwnersNameOrAnOldTokenChangesNothing() {
    String name = name("release-other");
    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();

    assertThat(backend().release(name, "B", a)).isFalse();
    assertThat(backend().release(name, "A", FencingToken.of(a.value() + 1))).isFalse();
    assertThat(liveHolder(name)).contains(new LeaseHolder("A", a));
  }

  @Test
  void renewalAfterExpiryFails() {
    String name = name("renew-expired");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);

    assertThat(backend().renew(name, "A", a, ttl())).isFalse();
  }

  @Test
  void releaseAfterExpiryAnswersFalseEvenWithNoNextHolder() {
    String name = name("release-expired");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);

    // Nobody took the lease over, so a backend whose store still names A must not take the
    // expired lease for A's: "true" would tell A its lease lasted until the release.
    assertThat(backend().release(name, "A", a)).as("A's release after its lease expired").isFalse();
  }

  @Test
  void releaseAfterARefusedRenewalAnswersFalse() {
    String name = name("release-after-lost");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);
    assertThat(backend().renew(name, "A", a, ttl())).as("A's renewal after expiry").isFalse();

    // The renewal said the lease is lost; a release cannot then say it was still A's to free.
    assertThat(backend().release(name, "A", a)).as("A's release after a refused renewal").isFalse();
  }

  @Test
  void renewalAfterAnotherHolderTookOverFailsAndLeavesTheirLeaseAlone() {
    String name = name("renew-taken");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    awaitExpiry(name);
    FencingToken b = backend().tryAcquire(name, "B", ttl()).get();

    assertThat(backend().renew(name, "A", a, ttl())).isFalse();
    assertThat(liveHolder(name)).contains(new LeaseHolder("B", b));
  }

  @Test
  void renewalByANonHolderFails() {
    String name = name("renew-other");
    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();

    assertThat(backend().renew(name, "B", a, ttl())).as("other owner, same token").isFalse();
    assertThat(backend().renew(name, "A", FencingToken.of(a.value() + 1), ttl()))
        .as("same owner, other token")
        .isFalse();
    assertThat(backend().renew(name, "A", a, ttl())).as("the holder itself").isTrue();
  }

  @Test
  void renewalExtendsTheLease() {
    String name = name("renew-extends");
    FencingToken a = backend().tryAcquire(name, "A", shortTtl()).get();
    assertThat(backend().renew(name, "A", a, ttl())).isTrue();

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(shortTtl().multipliedBy(2))
        .atMost(shortTtl().multipliedBy(4))
        .until(() -> liveHolder(name).isPresent());
    assertThat(backend().tryAcquire(name, "B", ttl()).isEmpty()).isTrue();
  }

  /**
   * A renewal sets the lease to end {@code ttl} from now, shorter than before too: a holder that
   * gives time back ({@code HeldLock.releaseNoEarlierThan}, or an extension to a shorter length)
   * lets the next holder in when it says, not at the end of its first, longer TTL.
   */
  @Test
  void renewalToAShorterLengthShortensTheLease() {
    String name = name("renew-shorter");
    Duration firstTtl = ttl().multipliedBy(6);
    FencingToken a = backend().tryAcquire(name, "A", firstTtl).get();

    assertThat(backend().renew(name, "A", a, shortTtl())).isTrue();

    awaitExpiry(name); // bounded far below the first TTL
    FencingToken b = backend().tryAcquire(name, "B", ttl()).get();
    assertThat(b.isNewerThan(a)).isTrue();
  }

  /** Shortened, then lengthened again past both earlier lengths: the last renewal counts. */
  @Test
  void renewalToALongerLengthAfterAShorterOneKeepsTheLease() {
    String name = name("renew-shorter-longer");
    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();
    assertThat(backend().renew(name, "A", a, shortTtl())).as("shorter").isTrue();
    assertThat(backend().renew(name, "A", a, ttl().multipliedBy(2))).as("longer").isTrue();

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(shortTtl().multipliedBy(2))
        .atMost(shortTtl().multipliedBy(4))
        .until(() -> liveHolder(name).isPresent());
    assertThat(backend().tryAcquire(name, "B", ttl()).isEmpty()).isTrue();
    assertThat(backend().holder(name).toJavaOptional()).contains(new LeaseHolder("A", a));
  }

  @Test
  void holderNamesTheOwnerAndTokenOfTheUnexpiredLeaseOnly() {
    String name = name("holder");
    assertThat(backend().holder(name).toJavaOptional()).as("never taken").isEmpty();

    FencingToken a = backend().tryAcquire(name, "A", ttl()).get();
    assertThat(backend().holder(name).toJavaOptional()).contains(new LeaseHolder("A", a));
    assertThat(backend().release(name, "A", a)).isTrue();
    assertThat(backend().holder(name).toJavaOptional()).as("released").isEmpty();

    FencingToken b = backend().tryAcquire(name, "B", shortTtl()).get();
    assertThat(backend().holder(name).toJavaOptional()).contains(new LeaseHolder("B", b));
    awaitExpiry(name);
    assertThat(backend().holder(name).toJavaOptional()).as("expired").isEmpty();
  }

  @Test
  void concurrentHoldersNeverOverlap() throws Exception {
    String name = name("fuzz");
    Counter counter = new Counter();
    ConcurrentLinkedQueue<FencingToken> tokensInEntryOrder = new ConcurrentLinkedQueue<>();
    AtomicInteger acquisitions = new AtomicInteger();
    AtomicInteger refusals = new AtomicInteger();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(FUZZ_THREADS);
    try {
      List<Future<?>> workers = new ArrayList<>();
      for (int t = 0; t < FUZZ_THREADS; t++) {
        String owner = "worker-" + t;
        workers.add(
            pool.submit(
                () -> {
                  start.await();
                  while (acquisitions.get() < FUZZ_ACQUISITIONS) {
                    Option<FencingToken> token = backend().tryAcquire(name, owner, ttl());
                    if (token.isEmpty()) {
                      refusals.incrementAndGet();
                      // Backoff so that 8 threads do not hammer the server; not a synchronisation.
                      LockSupport.parkNanos(
                          ThreadLocalRandom.current().nextLong(200_000, 1_000_000));
                      continue;
                    }
                    tokensInEntryOrder.add(token.get());
                    counter.incrementNonAtomically();
                    acquisitions.incrementAndGet();
                    backend().release(name, owner, token.get());
                  }
                  return null;
                }));
      }
      start.countDown();
      for (Future<?> worker : workers) {
        worker.get(5, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
    }

    List<FencingToken> tokens = new ArrayList<>(tokensInEntryOrder);
    assertThat(acquisitions.get()).isGreaterThanOrEqualTo(FUZZ_ACQUISITIONS);
    assertThat(counter.value())
        .as("no increment lost to an overlapping holder")
        .isEqualTo(acquisitions.get());
    assertThat(new HashSet<>(tokens)).as("every token unique").hasSize(tokens.size());
    assertThat(tokens)
        .as("tokens rise in the order holders entered")
        .isSortedAccordingTo(FencingToken::compareTo);
    assertThat(refusals.get()).as("the threads did contend").isPositive();
  }

  /** The holder of the unexpired lease of {@code name} that {@link #peek} shows, if any. */
  private Optional<LeaseHolder> liveHolder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder).toJavaOptional();
  }

  /** Waits until the server itself considers the lease of {@code name} expired (or gone). */
  protected void awaitExpiry(String name) {
    await()
        .atMost(shortTtl().multipliedBy(5).plusSeconds(2))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> peek(name).map(ObservedLease::isExpired).getOrElse(true));
  }

  /**
   * A counter whose increment is a read, a pause and a write: holders that overlap lose updates.
   * The pause widens the window so that a broken lock is caught on every run, not by luck.
   */
  private static final class Counter {
    private volatile long value;

    void incrementNonAtomically() {
      long read = value;
      LockSupport.parkNanos(50_000);
      value = read + 1;
    }

    long value() {
      return value;
    }
  }
}
