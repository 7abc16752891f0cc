package dev.nolock.lock.postgres;

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
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The {@link FencedLock} facade on this backend, with the fence it is meant to be used with. */
@ExtendWith(PostgresExtension.class)
class FencedLockOnPostgresIT {

  private static final Duration TTL = Duration.ofSeconds(10);

  private final DSLContext dsl;
  private final PostgresLockBackend backend;
  private final LockRows rows;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final CompletableFuture<LostLease> lostByA = new CompletableFuture<>();
  private final FencedLock lockA;
  private final FencedLock lockB;
  private final String name = "invoice-" + UUID.randomUUID();

  FencedLockOnPostgresIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.backend = PostgresLockBackend.create(schema.dataSource());
    this.rows = new LockRows(schema.dataSource(), PostgresLockConfig.DEFAULT_TABLE);
    this.lockA =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .owner("A-" + UUID.randomUUID())
                .metrics(registry, "billing")
                .onLeaseLost(lostByA::complete)
                .build());
    this.lockB =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS).owner("B-" + UUID.randomUUID()).build());
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    Fence.onTable(Fence.DEFAULT_TABLE).createTableIfMissing(schema.dsl());
  }

  @AfterEach
  void close() {
    lockA.close();
    lockB.close();
  }

  @Test
  void tryAcquireAndReleaseRoundTripThroughTheLeaseRow() {
    HeldLock held = lockA.tryAcquire(name, TTL).get();
    FencingToken token = held.lease().token();

    assertThat(rows.liveHolder(name)).contains(new LeaseHolder(held.owner(), token));
    assertThat(lockB.tryAcquire(name, TTL).isEmpty()).as("B while A holds it").isTrue();

    assertThat(held.release()).isEqualTo(new ReleaseOutcome.Released());

    assertThat(rows.expiredHolder(name)).contains(new LeaseHolder(held.owner(), token));
    HeldLock next = lockB.tryAcquire(name, TTL).get();
    assertThat(next.lease().token().value()).isEqualTo(token.value() + 1);
    assertThat(registry.get("nolock.conflicts").counter().count()).isZero();
  }

  @Test
  void theWatchdogKeepsTheLeaseBeyondItsTtl() {
    Duration ttl = Duration.ofMillis(1500);
    HeldLock held = lockA.tryAcquire(name, ttl).get();
    LeaseHolder stillA = new LeaseHolder(held.owner(), held.lease().token());

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(ttl.multipliedBy(3))
        .atMost(ttl.multipliedBy(5))
        .until(() -> held.isHeld() && rows.liveHolder(name).filter(stillA::equals).isPresent());

    assertThat(lockB.tryAcquire(name, ttl).isEmpty()).isTrue();
    assertThat(registry.get("nolock.renewals").counter().count()).isGreaterThanOrEqualTo(3);
    assertThat(registry.get("nolock.lease.losses").counter().count()).isZero();
  }

  @Test
  void aRenewalAfterAnotherHolderTookOverFailsAndTellsTheHolder() throws Exception {
    HeldLock a = lockA.tryAcquire(name, Duration.ofSeconds(3)).get();
    Lease leaseA = a.lease();

    rows.expireNow(name); // what a pause past the TTL looks like from the database
    HeldLock b = lockB.tryAcquire(name, TTL).get();
    Lease leaseB = b.lease();
    LostLease lost = lostByA.get(10, TimeUnit.SECONDS);

    assertThat(lost.name()).isEqualTo(name);
    assertThat(lost.token()).isEqualTo(leaseA.token());
    assertThat(lost.reason()).contains("refused the renewal");
    assertThatThrownBy(() -> a.checkPointOfNoReturn(Duration.ofMillis(10)))
        .isInstanceOf(LeaseLostException.class);
    assertThat(leaseB.token().isNewerThan(leaseA.token())).isTrue();
    assertThat(rows.liveHolder(name))
        .as("A's refused renewal left B's lease alone")
        .contains(new LeaseHolder(b.owner(), leaseB.token()));
    assertThat(b.isHeld()).isTrue();
    assertThat(registry.get("nolock.lease.losses").counter().count()).isOne();
    assertThat(registry.get("nolock.renewal.failures").counter().count()).isOne();
  }

  /**
   * The lease row is deleted (an operator's clean-up, a restored backup) while a grant holds it, so
   * the backend hands token 1 out again, to a second thread of the same process. With one owner per
   * process both grants would carry (1, owner) and both would pass the fence, and the first grant's
   * release would free the second's lease.
   */
  @Test
  void aReissuedTokenDoesNotLetTwoGrantsOfOneLockBothPassTheFence() {
    Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);
    HeldLock first = lockA.tryAcquire(name, TTL).get();
    rows.delete(name);
    HeldLock second = lockA.tryAcquire(name, TTL).get();
    assertThat(second.lease().token())
        .as("the backend reissued the first grant's token")
        .isEqualTo(first.lease().token());

    Either<FenceRejection, Integer> firstWrite = fence.write(dsl, first.lease(), tx -> 1);
    Either<FenceRejection, Integer> secondWrite = fence.write(dsl, second.lease(), tx -> 2);
    ReleaseOutcome firstRelease = first.release();

    assertThat(firstRelease)
        .as("the first grant's release learns that its lease passed to another grant")
        .isInstanceOf(ReleaseOutcome.Lost.class);
    assertThat(firstWrite.isRight()).as("the first grant's write").isTrue();
    assertThat(secondWrite.isLeft())
        .as("the second grant, with an equal token from the same process, is refused")
        .isTrue();
    assertThat(rows.liveHolder(name))
        .as("the first grant's release left the second grant's lease alone")
        .contains(new LeaseHolder(second.owner(), second.lease().token()));
    assertThat(first.owner()).isNotEqualTo(second.owner());
  }

  @Test
  void theFenceRefusesTheWriteOfAHolderThatLostItsLease() {
    HeldLock a = lockA.tryAcquire(name, Duration.ofSeconds(3)).get();
    Lease staleA = a.lease();
    rows.expireNow(name);
    HeldLock b = lockB.tryAcquire(name, TTL).get();
    Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);

    Either<FenceRejection, String> byB = fence.write(dsl, b.lease(), tx -> "B wrote");
    Either<FenceRejection, String> byA = fence.write(dsl, staleA, tx -> "A wrote");

    assertThat(byB).isEqualTo(Either.right("B wrote"));
    assertThat(byA.isLeft()).as("A's late write was attempted and refused").isTrue();
    assertThat(byA.getLeft().currentToken()).isEqualTo(b.lease().token());
  }

  /**
   * {@link HeldLock#releaseNoEarlierThan} on the database's clock: the holder's own clock is a
   * manual one that stands still, so the lease must last the whole 3 s from the release on, past
   * its 1 s TTL, and end then.
   */
  @Test
  void releaseNoEarlierThanKeepsOthersOutUntilThenEvenPastTheTtl() {
    ManualLeaseClock clock = new ManualLeaseClock();
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofSeconds(1)).get();

      assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(3)))
          .isInstanceOf(ReleaseOutcome.KeptUntil.class);

      assertThat(lockB.tryAcquire(name, TTL).isEmpty()).as("at once").isTrue();
      // Holding a condition for a while is an assertion, not a synchronisation.
      await()
          .during(Duration.ofMillis(1_500))
          .atMost(Duration.ofMillis(2_500))
          .until(() -> rows.liveHolder(name).isPresent());
      await().atMost(Duration.ofSeconds(10)).until(() -> lockB.tryAcquire(name, TTL).isDefined());
    }
  }

  /** The moment asked for comes long before the TTL's end: the lease is shortened to it. */
  @Test
  void releaseNoEarlierThanAMomentBeforeTheTtlEndsLetsOthersInThen() {
    ManualLeaseClock clock = new ManualLeaseClock();
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofMinutes(10)).get();

      assertThat(held.releaseNoEarlierThan(Duration.ofMillis(500)))
          .isInstanceOf(ReleaseOutcome.KeptUntil.class);

      await().atMost(Duration.ofSeconds(10)).until(() -> lockB.tryAcquire(name, TTL).isDefined());
    }
  }

  /** Negative control: once the moment has passed on the holder's clock, the release is plain. */
  @Test
  void releaseNoEarlierThanAMomentAlreadyPastFreesTheLeaseAtOnce() {
    ManualLeaseClock clock = new ManualLeaseClock();
    try (FencedLock job = job(clock)) {
      HeldLock held = job.tryAcquire(name, Duration.ofMinutes(10)).get();
      clock.advance(Duration.ofSeconds(4));

      assertThat(held.releaseNoEarlierThan(Duration.ofSeconds(3)))
          .isEqualTo(new ReleaseOutcome.Released());

      assertThat(lockB.tryAcquire(name, TTL).isDefined()).isTrue();
    }
  }

  private FencedLock job(ManualLeaseClock clock) {
    return FencedLock.create(
        backend,
        LockConfig.custom(LockPurpose.EFFICIENCY)
            .owner("job-" + UUID.randomUUID())
            .clock(clock)
            .autoRenew(false)
            .build());
  }
}
