package dev.nolock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicBoolean;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** What the provider refuses at its edge, and the thread binding, without a server. */
class NolockLockProviderTest {

  private final NolockLockProvider provider =
      NolockLockProvider.create(new InMemoryLockBackend(), LockPurpose.EFFICIENCY);

  @AfterEach
  void close() {
    provider.close();
  }

  @ParameterizedTest
  @ValueSource(strings = {" ", "\t", "job\u0000name", "job\nname", "half \uD800 pair"})
  void aNameNolockCannotStoreUnchangedIsRefusedSayingWhatToRename(String name) {
    assertThatThrownBy(() -> provider.lock(config(name, Duration.ofMinutes(1))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("cannot be a nolock lock")
        .hasMessageContaining("Rename it in @SchedulerLock(name = ...)")
        .hasMessageNotContaining("\u0000")
        .hasMessageNotContaining("\n");
  }

  @Test
  void aNameLongerThanNolockStoresIsRefusedSayingWhatToRename() {
    assertThatThrownBy(() -> provider.lock(config("j".repeat(256), Duration.ofMinutes(1))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("256 characters long, more than 255")
        .hasMessageContaining("Rename it in @SchedulerLock(name = ...)");
    provider.lock(config("j".repeat(255), Duration.ofMinutes(1))).orElseThrow().unlock();
  }

  @Test
  void closingTheProviderLeavesARunningLockHeldUntilItsLockAtMostFor() throws InterruptedException {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    NolockLockProvider closing = NolockLockProvider.create(backend, LockPurpose.EFFICIENCY);
    NolockLockProvider other = NolockLockProvider.create(backend, LockPurpose.EFFICIENCY);
    try {
      // The task runs on a scheduler thread of its own and has not unlocked when the provider
      // closes (the scheduler did not wait for it).
      AtomicBoolean locked = new AtomicBoolean();
      Thread task =
          new Thread(
              () -> locked.set(closing.lock(config("report", Duration.ofMinutes(1))).isPresent()));
      task.start();
      task.join();
      assertThat(locked).isTrue();
      closing.close();
      assertThat(other.lock(config("report", Duration.ofMinutes(1))))
          .as("another node must not start the task while this one's run may go on")
          .isEmpty();
    } finally {
      other.close();
    }
  }

  /**
   * The control: closing the FencedLock itself releases the running lock, and the other gets it.
   */
  @Test
  void theControlReleasingOnCloseLetsAnotherNodeStartTheSameTask() {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    dev.nolock.lock.FencedLock locks =
        dev.nolock.lock.FencedLock.create(
            backend,
            dev.nolock.lock.LockConfig.custom(LockPurpose.EFFICIENCY).autoRenew(false).build());
    NolockLockProvider other = NolockLockProvider.create(backend, LockPurpose.EFFICIENCY);
    try {
      assertThat(locks.tryAcquire("report", Duration.ofMinutes(1))).isNotEmpty();
      locks.close();
      Optional<SimpleLock> started = other.lock(config("report", Duration.ofMinutes(1)));
      assertThat(started).isPresent();
      started.get().unlock();
    } finally {
      other.close();
    }
  }

  @Test
  void aZeroOrTooLongLockAtMostForIsRefusedNamingTheAnnotation() {
    assertThatThrownBy(() -> provider.lock(config("job", Duration.ZERO)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lockAtMostFor of lock \"job\" is PT0S")
        .hasMessageContaining("@SchedulerLock(lockAtMostFor = ...)");
    assertThatThrownBy(() -> provider.lock(config("job", LockConfig.MAX_TTL.plusMillis(1))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at most " + LockConfig.MAX_TTL);
  }

  @Test
  void aConfigThatRenewsLeasesIsRefused() {
    LockConfig renewing = LockConfig.custom(LockPurpose.CORRECTNESS).build();

    assertThatThrownBy(() -> NolockLockProvider.create(new InMemoryLockBackend(), renewing))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("autoRenew(false)");
  }

  @Test
  void nullArgumentsAreRefusedSayingWhatToPass() {
    assertThatThrownBy(() -> NolockLockProvider.create(null, LockPurpose.CORRECTNESS))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("PostgresLockBackend.create");
    assertThatThrownBy(
            () -> NolockLockProvider.create(new InMemoryLockBackend(), (LockPurpose) null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("LockPurpose.CORRECTNESS");
    assertThatThrownBy(() -> SchedulerLease.current(null))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theGrantIsTheCallingThreadsFromLockToUnlockAndNestsByName() throws Exception {
    assertThatThrownBy(SchedulerLease::current)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("from a @SchedulerLock method");

    SimpleLock outer = provider.lock(config("outer", Duration.ofMinutes(1))).orElseThrow();
    SimpleLock inner = provider.lock(config("inner", Duration.ofMinutes(1))).orElseThrow();
    assertThat(SchedulerLease.current().name()).isEqualTo("inner");
    assertThat(SchedulerLease.current("outer").name()).isEqualTo("outer");
    Thread other = new Thread(() -> assertThat(SchedulerLease.current("outer")).isNull());
    Throwable[] seen = new Throwable[1];
    other.setUncaughtExceptionHandler((t, e) -> seen[0] = e);
    other.start();
    other.join();
    assertThat(seen[0]).isInstanceOf(IllegalStateException.class);

    inner.unlock();
    assertThat(SchedulerLease.current().name()).isEqualTo("outer");
    Thread unlocker = new Thread(outer::unlock);
    unlocker.start();
    unlocker.join();
    assertThatThrownBy(SchedulerLease::current)
        .as("unlocked on another thread: no longer this thread's")
        .isInstanceOf(IllegalStateException.class);
  }

  @Test
  void anEfficiencyLockReadsItsTokenButHandsOutNoLeaseToFence() {
    SimpleLock lock = provider.lock(config("job", Duration.ofMinutes(1))).orElseThrow();

    assertThat(SchedulerLease.current().token().value()).isPositive();
    assertThatThrownBy(() -> SchedulerLease.current().lease())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("EFFICIENCY");
    lock.unlock();
  }

  private static LockConfiguration config(String name, Duration atMost) {
    return new LockConfiguration(Instant.now(), name, atMost, Duration.ZERO);
  }
}
