package dev.nolock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.LockBackend;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockExtender;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * ShedLock's documented provider behaviour, run against each real nolock backend: mutual exclusion
 * under concurrent callers, the end at lockAtMostFor, the keep until lockAtLeastFor after an early
 * unlock, extension, and a token that strictly increases across grants. Two providers on one
 * backend stand for two nodes.
 *
 * <p>Timing: every bound asserted is a lower bound that only a broken lock can miss (a grant cannot
 * come back before the lease it waited for ended), and a refusal that depends on the first lease
 * still running is asserted only when the refused call answered within that lease (checked on the
 * monotonic clock), so a slow machine never fails these tests.
 */
abstract class ShedLockProviderContract {

  private static final AtomicInteger NAMES = new AtomicInteger();

  private NolockLockProvider nodeA;
  private NolockLockProvider nodeB;

  /** The backend under test; the same instance for both providers. */
  protected abstract LockBackend backend();

  @BeforeEach
  void providers() {
    nodeA = NolockLockProvider.create(backend(), LockPurpose.CORRECTNESS);
    nodeB = NolockLockProvider.create(backend(), LockPurpose.CORRECTNESS);
  }

  @AfterEach
  void closeProviders() {
    nodeA.close();
    nodeB.close();
  }

  @Test
  void oneHolderAtATimeAmongManyConcurrentCallersOnTwoNodes() throws Exception {
    ConcurrentHolders.Result result = ConcurrentHolders.run(List.of(nodeA, nodeB), name(), 6, 20);

    ConcurrentHolders.assertMutualExclusion(result, 20);
  }

  @Test
  void aLockEndsAtLockAtMostForAndAStaleUnlockDoesNotFreeTheNextHolder() {
    String name = name();
    Duration atMost = Duration.ofSeconds(2);
    long asked = System.nanoTime();
    SimpleLock first = nodeA.lock(config(name, atMost, Duration.ZERO)).orElseThrow();
    refusedWhileWithin(nodeB, name, asked, atMost);

    SimpleLock second = awaitGranted(nodeB, name);
    assertThat(Duration.ofNanos(System.nanoTime() - asked))
        .as("the next grant came no sooner than lockAtMostFor after the first was asked for")
        .isGreaterThanOrEqualTo(atMost);

    first.unlock();
    assertThat(nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)))
        .as("the stale unlock left the next holder's lock in place")
        .isEmpty();
    second.unlock();
    nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow().unlock();
  }

  @Test
  void anEarlyUnlockKeepsTheLockUntilLockAtLeastForAfterTheAcquisition() {
    String name = name();
    Duration atLeast = Duration.ofSeconds(3);
    long asked = System.nanoTime();
    nodeA.lock(config(name, Duration.ofSeconds(30), atLeast)).orElseThrow().unlock();
    refusedWhileWithin(nodeB, name, asked, atLeast);

    awaitGranted(nodeB, name).unlock();
    assertThat(Duration.ofNanos(System.nanoTime() - asked))
        .as("the lock was free no sooner than lockAtLeastFor after it was asked for")
        .isGreaterThanOrEqualTo(atLeast);
    assertThat(Duration.ofNanos(System.nanoTime() - asked))
        .as("and freed long before its lockAtMostFor of 30 s, by itself")
        .isLessThan(Duration.ofSeconds(30));
  }

  @Test
  void anUnlockAfterLockAtLeastForFreesTheLockAtOnce() {
    String name = name();
    nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow().unlock();

    nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow().unlock();
  }

  @Test
  void anExtendedLockIsHeldPastItsFirstLockAtMostFor() {
    String name = name();
    Duration atMost = Duration.ofSeconds(2);
    long asked = System.nanoTime();
    SimpleLock lock = nodeA.lock(config(name, atMost, Duration.ZERO)).orElseThrow();

    SimpleLock extended = lock.extend(Duration.ofSeconds(30), Duration.ZERO).orElseThrow();

    AtomicBoolean grantedToOther = new AtomicBoolean();
    await()
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> {
              nodeB
                  .lock(config(name, Duration.ofSeconds(30), Duration.ZERO))
                  .ifPresent(
                      stolen -> {
                        grantedToOther.set(true);
                        stolen.unlock();
                      });
              return grantedToOther.get()
                  || System.nanoTime() - asked > atMost.plusSeconds(1).toNanos();
            });
    assertThat(grantedToOther).as("another node got the lock while it was extended").isFalse();
    assertThatThrownBy(lock::unlock)
        .as("ShedLock's contract: the lock that was extended is spent")
        .isInstanceOf(IllegalStateException.class);

    extended.unlock();
    nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow().unlock();
  }

  @Test
  void anExtensionKeepsTheLockUntilItsOwnLockAtLeastForAfterAnUnlock() {
    String name = name();
    SimpleLock lock = nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow();
    long extendedAt = System.nanoTime();
    Duration atLeast = Duration.ofSeconds(3);

    lock.extend(Duration.ofSeconds(30), atLeast).orElseThrow().unlock();

    refusedWhileWithin(nodeB, name, extendedAt, atLeast);
    awaitGranted(nodeB, name).unlock();
    assertThat(Duration.ofNanos(System.nanoTime() - extendedAt))
        .as("free no sooner than lockAtLeastFor after the extension")
        .isGreaterThanOrEqualTo(atLeast);
  }

  @Test
  void extendingALockThatRanOutAnswersEmpty() {
    String name = name();
    Duration atMost = Duration.ofSeconds(2);
    long asked = System.nanoTime();
    SimpleLock lock = nodeA.lock(config(name, atMost, Duration.ZERO)).orElseThrow();
    await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> System.nanoTime() - asked > atMost.plusMillis(200).toNanos());

    assertThat(lock.extend(Duration.ofSeconds(30), Duration.ZERO)).isEmpty();
    awaitGranted(nodeB, name).unlock();
  }

  @Test
  void extendingALockAnotherNodeTookOverAnswersEmptyAndLeavesTheOtherHolder() {
    String name = name();
    SimpleLock lock = nodeA.lock(config(name, Duration.ofSeconds(2), Duration.ZERO)).orElseThrow();
    SimpleLock taken = awaitGranted(nodeB, name);

    assertThat(lock.extend(Duration.ofSeconds(30), Duration.ZERO)).isEmpty();

    assertThat(nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)))
        .as("the refused extension left the other node's lock in place")
        .isEmpty();
    taken.unlock();
  }

  @Test
  void everyGrantHasAHigherTokenThanTheOneBeforeAndAnExtensionKeepsIt() {
    String name = name();
    List<FencingToken> tokens = new ArrayList<>();

    SimpleLock first = nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).get();
    tokens.add(SchedulerLease.current(name).token());
    SimpleLock extended = first.extend(Duration.ofSeconds(30), Duration.ZERO).orElseThrow();
    assertThat(SchedulerLease.current(name).token())
        .as("an extension is the same grant")
        .isEqualTo(tokens.get(0));
    extended.unlock();

    SimpleLock second = nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).get();
    tokens.add(SchedulerLease.current(name).token());
    second.unlock();

    SimpleLock expiring = nodeA.lock(config(name, Duration.ofSeconds(2), Duration.ZERO)).get();
    tokens.add(SchedulerLease.current(name).token());
    SimpleLock afterExpiry = awaitGranted(nodeB, name);
    tokens.add(SchedulerLease.current(name).token());
    afterExpiry.unlock();
    expiring.unlock();

    assertThat(tokens).hasSize(4);
    for (int i = 1; i < tokens.size(); i++) {
      assertThat(tokens.get(i).isNewerThan(tokens.get(i - 1)))
          .as("token %s after %s", tokens.get(i), tokens.get(i - 1))
          .isTrue();
    }
  }

  @Test
  void aTaskRunByShedLocksExecutorReadsItsGrantAndExtendsThroughLockExtender() {
    String name = name();
    AtomicBoolean ran = new AtomicBoolean();
    new DefaultLockingTaskExecutor(nodeA)
        .executeWithLock(
            (Runnable)
                () -> {
                  FencingToken token = SchedulerLease.current().token();
                  LockExtender.extendActiveLock(Duration.ofSeconds(60), Duration.ZERO);
                  assertThat(SchedulerLease.current().token()).isEqualTo(token);
                  SchedulerLease.current().checkPointOfNoReturn(Duration.ofMillis(10));
                  assertThat(SchedulerLease.current().lease().token()).isEqualTo(token);
                  assertThat(nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)))
                      .isEmpty();
                  ran.set(true);
                },
            config(name, Duration.ofSeconds(30), Duration.ZERO));

    assertThat(ran).isTrue();
    assertThatThrownBy(SchedulerLease::current).isInstanceOf(IllegalStateException.class);
    nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow().unlock();
  }

  @Test
  void aMethodStillRunningAfterLockAtMostForLearnsItLostTheLock() {
    String name = name();
    SimpleLock lock = nodeA.lock(config(name, Duration.ofSeconds(2), Duration.ZERO)).orElseThrow();
    HeldLock held = SchedulerLease.current(name);

    await().atMost(Duration.ofSeconds(20)).until(() -> !held.isHeld());

    assertThatThrownBy(() -> SchedulerLease.current(name).checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class);
    lock.unlock();
    assertThatThrownBy(() -> SchedulerLease.current(name))
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void namesWithSpacesPunctuationAndNonAsciiCharactersAreLocksOfTheirOwn() {
    String base = name();
    List<String> names =
        List.of(base + " report:daily/eu-west", base + " Überweisung ✓", base + " 🎉{tag}");
    List<SimpleLock> held = new ArrayList<>();
    for (String name : names) {
      held.add(nodeA.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)).orElseThrow());
      assertThat(nodeB.lock(config(name, Duration.ofSeconds(30), Duration.ZERO))).isEmpty();
    }
    held.forEach(SimpleLock::unlock);
  }

  private static void refusedWhileWithin(
      NolockLockProvider other, String name, long sinceNanos, Duration within) {
    Optional<SimpleLock> got = other.lock(config(name, Duration.ofSeconds(30), Duration.ZERO));
    boolean answeredWithin = System.nanoTime() - sinceNanos < within.toNanos();
    got.ifPresent(SimpleLock::unlock);
    if (answeredWithin) {
      assertThat(got).as("another node's lock() answered within %s", within).isEmpty();
    }
  }

  private static SimpleLock awaitGranted(NolockLockProvider provider, String name) {
    // In this thread: a grant is bound to the thread that called lock() (SchedulerLease).
    return await()
        .pollInSameThread()
        .atMost(Duration.ofSeconds(30))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> provider.lock(config(name, Duration.ofSeconds(30), Duration.ZERO)),
            Optional::isPresent)
        .orElseThrow();
  }

  private static LockConfiguration config(String name, Duration atMost, Duration atLeast) {
    return new LockConfiguration(Instant.now(), name, atMost, atLeast);
  }

  private static String name() {
    return "shedlock-job-" + NAMES.incrementAndGet();
  }
}
