package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.dynamodb.DynamoDbFence;
import dev.nolock.dynamodb.DynamoDbFenceConfig;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.LostLease;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.FenceAuditor;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The {@link FencedLock} facade over {@link DynamoDbLockBackend}: the watchdog's heartbeats keep
 * the lease from a contender that keeps trying, a holder whose rvn was changed by someone else
 * learns at its next renewal, and a stale holder that skips its check is refused by the {@link
 * DynamoDbFence}.
 */
@ExtendWith(DynamoDbExtension.class)
class FencedLockOnDynamoDbIT {

  private static DynamoDbClient dynamo;
  private static DynamoDbLockBackend backend;
  private static String dataTable;

  private final CompletableFuture<LostLease> lostByA = new CompletableFuture<>();
  private FencedLock lockA;
  private FencedLock lockB;

  @BeforeAll
  static void createTables(DynamoDbClient client) {
    dynamo = client;
    backend = LockTables.backendOnNewTable(dynamo, "nolock_fenced_locks_");
    dataTable = LockTables.unique("nolock_fenced_data_");
    LockTables.createDataTable(dynamo, dataTable);
  }

  @AfterAll
  static void dropTables() {
    LockTables.drop(dynamo, backend.config().tableName());
    LockTables.drop(dynamo, dataTable);
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
  void theWatchdogsHeartbeatsKeepTheLeaseFromAContenderThatKeepsTrying() {
    lockA = FencedLock.create(backend, config("A", true).build());
    DynamoDbLockBackend contender = DynamoDbLockBackend.create(dynamo, backend.config());
    Duration ttl = Duration.ofMillis(900);
    String name = "renewed";
    HeldLock held = lockA.tryAcquire(name, ttl).get();
    Set<String> rvns = ConcurrentHashMap.newKeySet();

    await()
        .during(ttl.multipliedBy(4))
        .atMost(ttl.multipliedBy(6))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              rvns.add(LockTables.item(dynamo, backend.config(), name).get("rvn").s());
              return held.isHeld() && contender.tryAcquire(name, "B", ttl).isEmpty();
            });

    held.checkPointOfNoReturn(Duration.ofMillis(10));
    assertThat(lostByA).isNotDone();
    assertThat(rvns).as("every heartbeat wrote a new rvn").hasSizeGreaterThanOrEqualTo(4);
  }

  @Test
  void aHolderWhoseRvnWasChangedLosesTheLeaseAtItsNextRenewal() throws Exception {
    lockA = FencedLock.create(backend, config("A", true).build());
    Duration ttl = Duration.ofSeconds(3);
    String name = "rvn-changed";
    HeldLock a = lockA.tryAcquire(name, ttl).get();

    LockTables.overwriteRvn(dynamo, backend.config(), name, "changed-externally");

    LostLease lost = lostByA.get(ttl.toMillis() * 2, TimeUnit.MILLISECONDS);
    assertThat(lost.name()).isEqualTo(name);
    assertThat(lost.reason()).contains("refused the renewal");
    assertThat(a.isLost()).isTrue();
    assertThatThrownBy(() -> a.checkPointOfNoReturn(Duration.ofMillis(10)))
        .isInstanceOf(LeaseLostException.class);
    assertThat(LockTables.item(dynamo, backend.config(), name))
        .as("the refused renewal wrote nothing")
        .containsEntry("rvn", AttributeValue.fromS("changed-externally"));
  }

  @Test
  void aStaleHolderThatSkipsItsCheckIsRefusedByTheDynamoDbFence() {
    lockA = FencedLock.create(backend, config("A", false).build());
    ManualLeaseClock clockB = new ManualLeaseClock();
    lockB =
        FencedLock.create(
            DynamoDbLockBackend.create(
                dynamo,
                DynamoDbLockBackendConfig.custom()
                    .tableName(backend.config().tableName())
                    .clock(clockB)
                    .build()),
            config("B", false).clock(clockB).build());
    DynamoDbFence fence =
        DynamoDbFence.create(dynamo, DynamoDbFenceConfig.custom(dataTable).build());
    Map<String, AttributeValue> invoice = Map.of("pk", AttributeValue.fromS("invoice-42"));
    String name = "fenced";
    Duration ttl = Duration.ofSeconds(30);
    FenceAuditor auditor = new FenceAuditor();

    HeldLock a = lockA.tryAcquire(name, ttl).get();
    assertThat(lockB.tryAcquire(name, ttl)).as("B starts watching A's lease").isEmpty();
    clockB.advance(ttl); // A, "paused", sends no heartbeat while B's clock runs a full duration
    HeldLock b = lockB.tryAcquire(name, ttl).get();
    assertThat(fence.put(b.lease(), invoice, Map.of("status", AttributeValue.fromS("B"))).isRight())
        .isTrue();

    auditor.attempted(name, a.lease().token(), a.lease().owner());
    Either<FenceRejection, Void> late =
        fence.put(a.lease(), invoice, Map.of("status", AttributeValue.fromS("A")));
    if (late.isLeft()) {
      auditor.refused(name, a.lease().token(), a.lease().owner());
    }

    assertThat(b.lease().token().isNewerThan(a.lease().token())).isTrue();
    assertThat(auditor.attempts(a.owner())).isEqualTo(1);
    assertThat(auditor.refusals(a.owner())).isEqualTo(1);
    assertThat(
            dynamo
                .getItem(get -> get.tableName(dataTable).key(invoice).consistentRead(true))
                .item())
        .containsEntry("status", AttributeValue.fromS("B"));
  }

  private LockConfig.Builder config(String owner, boolean autoRenew) {
    LockConfig.Builder config =
        LockConfig.custom(LockPurpose.CORRECTNESS).owner(owner).autoRenew(autoRenew);
    if (owner.equals("A")) {
      config.onLeaseLost(lostByA::complete);
    }
    return config;
  }
}
