package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link HeldLock#extend}, {@link HeldLock#releaseNoEarlierThan} and what {@link
 * HeldLock#release()} answers, on the in-memory backend with one manual clock for the holder and
 * the "server", so that every step is exact.
 */
class HeldLockExtendAndReleaseTest {

  private final ManualLeaseClock clock = new ManualLeaseClock();
  private final InMemoryLockBackend backend = new InMemoryLockBackend(clock);
  private final List<FencedLock> opened = new ArrayList<>();
  private final FencedLock lock = withoutWatchdog(backend);
  private final FencedLock other = withoutWatchdog(backend);

  private FencedLock withoutWatchdog(LockBackend on) {
    FencedLock created =
        FencedLock.create(
            on, LockConfig.custom(LockPurpose.CORRECTNESS).clock(clock).autoRenew(false).build());
    opened.add(created);
    return created;
  }

  @AfterEach
  void close() {
    opened.forEach(FencedLock::close);
  }

  @Test
  void anExtensionToALongerLengthOutlastsTheFirstTtl() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();
    clock.advance(Duration.ofSeconds(2));

    held.extend(Duration.ofSeconds(10));
    clock.advance(Duration.ofSeconds(5)); // 7 s in: past the first TTL

    held.checkPointOfNoReturn(Duration.ZERO);
    assertThat(held.ttl()).isEqualTo(Duration.ofSeconds(10));
    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isEmpty()).isTrue();
  }

  /** Negative control for the test above: without the extension the lease ends at its TTL. */
  @Test
  void withoutAnExtensionTheLeaseEndsAtItsFirstTtl() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();
    clock.advance(Duration.ofSeconds(7));

    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class);
    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isDefined()).isTrue();
  }

  @Test
  void anExtensionToAShorterLengthEndsTheLeaseSooner() {
    HeldLock held = lock.tryAcquire("report", Duration.ofMinutes(10)).get();

    held.extend(Duration.ofSeconds(1));
    clock.advance(Duration.ofMillis(1_001));

    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .as("the holder counts the shorter lease too")
        .isInstanceOf(LeaseLostException.class);
    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isDefined()).isTrue();
  }

  @Test
  void aRefusedExtensionLosesTheLease() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();
    // The server expired it already (the holder's clock ran slow, say): another holder took it.
    backend.release("report", held.owner(), held.token());
    other.tryAcquire("report", Duration.ofSeconds(30)).get();

    assertThatThrownBy(() -> held.extend(Duration.ofSeconds(30)))
        .isInstanceOf(LeaseLostException.class)
        .hasMessageContaining("refused the extension");
    assertThat(held.isLost()).isTrue();
  }

  /**
   * A shorter extension whose answer was lost may have been applied: the holder must count the
   * sooner of the two ends, or it would write after the server gave the lease away.
   */
  @Test
  void aShorterExtensionWhoseAnswerWasLostCountsTheSoonerEnd() {
    HeldLock held = lostAnswers().tryAcquire("report", Duration.ofMinutes(10)).get();

    assertThatThrownBy(() -> held.extend(Duration.ofSeconds(1)))
        .isInstanceOf(BackendUnavailableException.class);
    clock.advance(Duration.ofMillis(1_001));

    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .isInstanceOf(LeaseLostException.class);
    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isDefined())
        .as("the server did apply it")
        .isTrue();
  }

  /** Negative control: a longer extension whose answer was lost keeps the old, sooner end. */
  @Test
  void aLongerExtensionWhoseAnswerWasLostKeepsTheOldEnd() {
    HeldLock held = lostAnswers().tryAcquire("report", Duration.ofSeconds(3)).get();

    assertThatThrownBy(() -> held.extend(Duration.ofMinutes(10)))
        .isInstanceOf(BackendUnavailableException.class);

    assertThat(held.deadline().remaining()).isLessThanOrEqualTo(Duration.ofSeconds(3));
  }

  /**
   * A shorter renewal whose answer was lost can reach the server after a longer one that succeeded
   * (a pooled connection stuck in retransmission), and cut the lease to its own length: the holder
   * must not believe the longer one's end until then.
   */
  @Test
  void aShorterRenewalDeliveredAfterALongerOneCannotLeaveTheHolderBelievingTheLongerEnd() {
    Runnable[] heldBack = new Runnable[1];
    FencedLock delaying =
        withoutWatchdog(
            new ForwardingLockBackend(backend) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
                if (heldBack[0] == null) {
                  heldBack[0] = () -> backend.renew(name, owner, token, ttl); // delivered later
                  throw new BackendUnavailableException("connection stuck", null);
                }
                return backend.renew(name, owner, token, ttl);
              }
            });
    HeldLock held = delaying.tryAcquire("report", Duration.ofSeconds(30)).get();

    assertThatThrownBy(() -> held.extend(Duration.ofSeconds(2)))
        .isInstanceOf(BackendUnavailableException.class);
    held.extend(Duration.ofHours(1));
    heldBack[0].run(); // the lost 2 s renewal lands now: the server's lease ends in 2 s
    clock.advance(Duration.ofMillis(2_001));

    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isDefined())
        .as("the server gave the lease away at the held-back renewal's end")
        .isTrue();
    assertThatThrownBy(() -> held.checkPointOfNoReturn(Duration.ZERO))
        .as("so the holder must not believe the hour")
        .isInstanceOf(LeaseLostException.class);
  }

  /**
   * A failed extension keeps the sooner of the old end and the new one, decided on the two ends
   * themselves: before the fix it compared the old deadline's remainder read at one instant with
   * the new one's read at a later instant, so an extension ending up to the time between the two
   * readings later than the old end passed for the sooner one. The clock here moves 10 ms at every
   * reading once the extension's call failed; the extension ends 5 ms after the old end.
   */
  @Test
  void aFailedExtensionEndingJustAfterTheOldEndKeepsTheOldEnd() {
    AtomicLong now = new AtomicLong();
    AtomicLong step = new AtomicLong();
    LeaseClock ticking = () -> now.getAndAdd(step.get());
    FencedLock failing =
        FencedLock.create(
            new ForwardingLockBackend(backend) {
              @Override
              public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
                step.set(Duration.ofMillis(10).toNanos()); // from here on every reading moves it
                throw new BackendUnavailableException("request lost on the way", null);
              }
            },
            LockConfig.custom(LockPurpose.CORRECTNESS).clock(ticking).autoRenew(false).build());
    opened.add(failing);
    HeldLock held = failing.tryAcquire("report", Duration.ofSeconds(10)).get(); // ends at 10 s
    now.set(Duration.ofSeconds(1).toNanos());

    assertThatThrownBy(() -> held.extend(Duration.ofMillis(9_005))) // would end at 10.005 s
        .isInstanceOf(BackendUnavailableException.class);
    step.set(0);
    now.set(Duration.ofSeconds(10).toNanos());

    assertThat(held.deadline().hasExpired())
        .as("the request never reached the server, whose lease ended at 10 s")
        .isTrue();
  }

  private FencedLock lostAnswers() {
    return withoutWatchdog(
        new ForwardingLockBackend(backend) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            backend.renew(name, owner, token, ttl); // applied, but the answer is lost
            throw new BackendUnavailableException("connection reset", null);
          }
        });
  }

  /**
   * With a watchdog, an extension to a shorter length also renews more often: renewing every third
   * of the first TTL would lose the shorter lease between two renewals.
   */
  @Test
  void aShorterExtensionMakesTheWatchdogRenewOftenEnough() {
    InMemoryLockBackend server = new InMemoryLockBackend();
    try (FencedLock watched =
        FencedLock.create(server, LockConfig.ofDefaults(LockPurpose.CORRECTNESS))) {
      HeldLock held = watched.tryAcquire("report", Duration.ofSeconds(30)).get();

      // 1.5 s renewed every 0.5 s leaves a stall of a second of slack on a loaded machine; the
      // first TTL's rhythm (every 10 s) would let it run out within the 3 s watched.
      held.extend(Duration.ofMillis(1_500));

      await()
          .during(Duration.ofMillis(3_000))
          .atMost(Duration.ofSeconds(6))
          .until(() -> held.isHeld() && !server.inspect("report").get().isExpired());
    }
  }

  @Test
  void releaseSaysItFreedTheLeaseAndASecondReleaseSaysTheSame() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();

    ReleaseOutcome first = held.release();

    assertThat(first).isInstanceOf(ReleaseOutcome.Released.class);
    assertThat(held.release()).isSameAs(first);
    assertThat(other.tryAcquire("report", Duration.ofSeconds(3)).isDefined()).isTrue();
  }

  @Test
  void releaseSaysTheLeaseHadRunOutAtItsTtl() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();
    clock.advance(Duration.ofSeconds(4));

    assertThat(held.release())
        .isEqualTo(
            new ReleaseOutcome.Lost(
                LostLease.Cause.TTL_REACHED,
                "the lease reached its TTL of PT3S (auto-renewal is off)"));
  }

  @Test
  void releaseSaysTheLeaseHadPassedToAnotherHolder() {
    HeldLock held = lock.tryAcquire("report", Duration.ofSeconds(3)).get();
    backend.release("report", held.owner(), held.token()); // the server ended it early
    other.tryAcquire("report", Duration.ofSeconds(30)).get();

    ReleaseOutcome outcome = held.release();

    assertThat(outcome).isInstanceOf(ReleaseOutcome.Lost.class);
    assertThat(((ReleaseOutcome.Lost) outcome).cause()).isEqualTo(LostLease.Cause.REFUSED);
    assertThat(held.isLost()).isTrue();
  }

  @Test
  void releaseSaysItsOutcomeIsUnknownWhenTheBackendFailed() {
    FencedLock failing =
        withoutWatchdog(
            new ForwardingLockBackend(backend) {
              @Override
              public boolean release(String name, String owner, FencingToken token) {
                throw new BackendUnavailableException("connection reset", null);
              }
            });
    HeldLock held = failing.tryAcquire("report", Duration.ofSeconds(3)).get();

    assertThat(held.release()).isInstanceOf(ReleaseOutcome.Unknown.class);
  }

  @Test
  void releaseNoEarlierThanKeepsOthersOutUntilThenAndNoLonger() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(10)).get();
    clock.advance(Duration.ofSeconds(1)); // the job took a second

    ReleaseOutcome outcome = held.releaseNoEarlierThan(Duration.ofSeconds(5));

    assertThat(outcome).isInstanceOf(ReleaseOutcome.KeptUntil.class);
    assertThat(((ReleaseOutcome.KeptUntil) outcome).until().remaining())
        .isEqualTo(Duration.ofSeconds(4));
    assertThat(held.isHeld()).isFalse();
    clock.advance(Duration.ofMillis(3_999));
    assertThat(other.tryAcquire("every-minute", Duration.ofSeconds(10)).isEmpty())
        .as("1 ms before the moment")
        .isTrue();
    clock.advance(Duration.ofMillis(1));
    assertThat(other.tryAcquire("every-minute", Duration.ofSeconds(10)).isDefined())
        .as("at the moment, not at the end of the 10 s TTL")
        .isTrue();
  }

  @Test
  void releaseNoEarlierThanMayKeepTheLeasePastItsTtl() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(2)).get();
    clock.advance(Duration.ofSeconds(1));

    assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(5)))
        .isInstanceOf(ReleaseOutcome.KeptUntil.class);
    clock.advance(Duration.ofSeconds(3)); // 4 s in: past the 2 s TTL

    assertThat(other.tryAcquire("every-minute", Duration.ofSeconds(10)).isEmpty()).isTrue();
    assertThat(held.release()).as("idempotent").isInstanceOf(ReleaseOutcome.KeptUntil.class);
  }

  @Test
  void releaseNoEarlierThanAMomentAlreadyPastReleasesAtOnce() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(10)).get();
    clock.advance(Duration.ofSeconds(6));

    assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(5)))
        .isInstanceOf(ReleaseOutcome.Released.class);
    assertThat(other.tryAcquire("every-minute", Duration.ofSeconds(10)).isDefined()).isTrue();
  }

  /** Negative control: a plain release lets the next holder in at once. */
  @Test
  void aPlainReleaseLetsTheNextHolderInAtOnce() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(10)).get();
    clock.advance(Duration.ofSeconds(1));

    held.release();

    assertThat(other.tryAcquire("every-minute", Duration.ofSeconds(10)).isDefined()).isTrue();
  }

  @Test
  void releaseNoEarlierThanAfterTheLeaseWasLostSaysSo() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(2)).get();
    clock.advance(Duration.ofSeconds(3));

    assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(5)))
        .isInstanceOf(ReleaseOutcome.Lost.class);
  }

  @Test
  void releaseNoEarlierThanRefusesABadDurationWithAFix() {
    HeldLock held = lock.tryAcquire("every-minute", Duration.ofSeconds(2)).get();

    assertThatThrownBy(() -> held.releaseNoEarlierThan(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("afterAcquiring must be between zero and");
    assertThat(held.isHeld()).isTrue();
  }
}
