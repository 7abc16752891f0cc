package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.LostLease;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The {@link FencedLock} facade over {@link RedisLockBackend}: the watchdog keeps a lease alive
 * past its TTL, and a holder whose lease expired while it was paused (simulated by deleting the
 * lease key) learns it at its next renewal, while the new holder's lease is left alone.
 */
@ExtendWith(RedisExtension.class)
class FencedLockOnRedisIT {

  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisLockBackend backend;
  private static RedisFence fence;
  private static RedisKeys keys;

  private final CompletableFuture<LostLease> lostByA = new CompletableFuture<>();
  private FencedLock lockA;
  private FencedLock lockB;

  @BeforeAll
  static void connect(RedisClient client, RedisKeys classKeys) {
    keys = classKeys;
    connection = client.connect();
    redis = connection.sync();
    backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build());
    fence =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("fence:"))
                .lockKeyPrefix(backend.config().keyPrefix())
                .build());
    fence.establish(0);
  }

  @AfterAll
  static void disconnect() {
    connection.close();
  }

  @AfterEach
  void closeLocks() {
    if (lockA != null) {
      lockA.close();
    }
    if (lockB != null) {
      lockB.close();
    }
  }

  @Test
  void theWatchdogKeepsTheLeaseBeyondItsTtl() {
    lockA = lock("A", true);
    Duration ttl = Duration.ofMillis(900);
    HeldLock held = lockA.tryAcquire("renewed", ttl).get();
    String leaseKey = backend.config().leaseKey("renewed");
    String value = redis.get(leaseKey);

    await()
        .during(ttl.multipliedBy(4))
        .atMost(ttl.multipliedBy(6))
        .pollInterval(Duration.ofMillis(50))
        .until(() -> held.isHeld() && value.equals(redis.get(leaseKey)));
    held.checkPointOfNoReturn(Duration.ofMillis(10));
    assertThat(lostByA).isNotDone();
  }

  @Test
  void aHolderWhoseLeaseExpiredLearnsAtItsNextRenewalAndLeavesTheNewHolderAlone() throws Exception {
    lockA = lock("A", true);
    lockB = lock("B", false);
    Duration ttlA = Duration.ofSeconds(3);
    Duration ttlB = Duration.ofSeconds(60);
    String name = "paused";
    String leaseKey = backend.config().leaseKey(name);
    HeldLock a = lockA.tryAcquire(name, ttlA).get();

    // A is "paused" past its lease: the server forgets it, and B takes over.
    redis.del(leaseKey);
    HeldLock b = lockB.tryAcquire(name, ttlB).get();
    String bValue = redis.get(leaseKey);

    LostLease lost = lostByA.get(ttlA.toMillis() * 2, TimeUnit.MILLISECONDS);
    assertThat(lost.name()).isEqualTo(name);
    assertThat(lost.reason()).contains("refused the renewal");
    assertThat(a.isLost()).isTrue();
    assertThatThrownBy(() -> a.checkPointOfNoReturn(Duration.ofMillis(10)))
        .isInstanceOf(LeaseLostException.class);
    assertThat(b.isHeld()).isTrue();
    assertThat(redis.get(leaseKey))
        .as("B's lease value")
        .isEqualTo(bValue)
        .startsWith(b.owner() + "|");
    assertThat(redis.pttl(leaseKey))
        .as("A's refused renewal did not set B's TTL to A's")
        .isGreaterThan(ttlA.toMillis());
    assertThat(b.lease().token().isNewerThan(a.lease().token())).isTrue();
  }

  @Test
  void aStaleHolderThatSkipsItsCheckIsStillRefusedByTheRedisFence() {
    lockA = lock("A", false);
    lockB = lock("B", false);
    String name = "fenced";
    String key = keys.key("data:" + name);
    FenceAuditor auditor = new FenceAuditor();
    HeldLock a = lockA.tryAcquire(name, Duration.ofSeconds(30)).get();
    redis.del(backend.config().leaseKey(name));
    HeldLock b = lockB.tryAcquire(name, Duration.ofSeconds(30)).get();
    assertThat(fence.write(b.lease(), key, "B").isRight()).isTrue();

    auditor.attempted(name, a.lease().token(), a.lease().owner());
    Either<FenceRejection, Void> late = fence.write(a.lease(), key, "A");
    if (late.isLeft()) {
      auditor.refused(name, a.lease().token(), a.lease().owner());
    }

    assertThat(auditor.attempts(a.owner())).isEqualTo(1);
    assertThat(auditor.refusals(a.owner())).isEqualTo(1);
    assertThat(redis.get(key)).isEqualTo("B");
  }

  /**
   * Redis loses the lease and its counter (a restart without persistence, a failover to a replica
   * that had not received them) while a grant holds it, so token 1 goes out again, to a second
   * thread of the same process. With one owner per process both lease values would read {@code
   * owner|1}, and the first grant's release would delete the second grant's lease.
   */
  @Test
  void aReissuedTokenDoesNotLetOneGrantReleaseAnotherGrantOfTheSameProcess() {
    lockA = lock("A", false);
    String name = "reissued";
    String leaseKey = backend.config().leaseKey(name);
    HeldLock first = lockA.tryAcquire(name, Duration.ofSeconds(30)).get();
    redis.del(leaseKey, backend.config().counterKey(name));
    HeldLock second = lockA.tryAcquire(name, Duration.ofSeconds(30)).get();
    assertThat(second.lease().token())
        .as("Redis reissued the first grant's token")
        .isEqualTo(first.lease().token());

    assertThat(first.release())
        .as("the first grant's release learns that its lease passed to another grant")
        .isInstanceOf(ReleaseOutcome.Lost.class);

    assertThat(redis.get(leaseKey))
        .as("the first grant's release left the second grant's lease alone")
        .isEqualTo(second.owner() + "|" + second.lease().token().value());
    assertThat(second.isHeld()).isTrue();
  }

  private FencedLock lock(String owner, boolean autoRenew) {
    LockConfig.Builder config =
        LockConfig.custom(LockPurpose.CORRECTNESS).owner(owner).autoRenew(autoRenew);
    if (owner.equals("A")) {
      config.onLeaseLost(lostByA::complete);
    }
    return FencedLock.create(backend, config.build());
  }

  /**
   * {@link HeldLock#releaseNoEarlierThan} on Redis's clock (PX): the holder's own clock is a manual
   * one that stands still, so the lease must last the whole 3 s from the release on, past its 1 s
   * TTL, and end then.
   */
  @Test
  void releaseNoEarlierThanKeepsOthersOutUntilThenEvenPastTheTtl() {
    ManualLeaseClock clock = new ManualLeaseClock();
    String name = "kept-" + UUID.randomUUID();
    lockB = lock("B", false);
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofSeconds(1)).get();

      assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(3)))
          .isInstanceOf(ReleaseOutcome.KeptUntil.class);

      assertThat(lockB.tryAcquire(name, Duration.ofSeconds(10)).isEmpty()).as("at once").isTrue();
      // Holding a condition for a while is an assertion, not a synchronisation.
      await()
          .during(Duration.ofMillis(1_500))
          .atMost(Duration.ofMillis(2_500))
          .until(() -> redis.exists(backend.config().leaseKey(name)) == 1L);
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> lockB.tryAcquire(name, Duration.ofSeconds(10)).isDefined());
    }
  }

  /** The moment asked for comes long before the TTL's end: the lease is shortened to it. */
  @Test
  void releaseNoEarlierThanAMomentBeforeTheTtlEndsLetsOthersInThen() {
    ManualLeaseClock clock = new ManualLeaseClock();
    String name = "kept-" + UUID.randomUUID();
    lockB = lock("B", false);
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofMinutes(10)).get();

      assertThat(held.releaseNoEarlierThan(Duration.ofMillis(500)))
          .isInstanceOf(ReleaseOutcome.KeptUntil.class);

      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> lockB.tryAcquire(name, Duration.ofSeconds(10)).isDefined());
    }
  }

  /** Negative control: once the moment has passed on the holder's clock, the release is plain. */
  @Test
  void releaseNoEarlierThanAMomentAlreadyPastFreesTheLeaseAtOnce() {
    ManualLeaseClock clock = new ManualLeaseClock();
    String name = "kept-" + UUID.randomUUID();
    lockB = lock("B", false);
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofMinutes(10)).get();
      clock.advance(Duration.ofSeconds(4));

      assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(3)))
          .isEqualTo(new ReleaseOutcome.Released());

      assertThat(lockB.tryAcquire(name, Duration.ofSeconds(10)).isDefined()).isTrue();
    }
  }

  private FencedLock job(ManualLeaseClock clock) {
    return FencedLock.create(
        backend,
        LockConfig.custom(LockPurpose.EFFICIENCY)
            .owner("job")
            .clock(clock)
            .autoRenew(false)
            .build());
  }
}
