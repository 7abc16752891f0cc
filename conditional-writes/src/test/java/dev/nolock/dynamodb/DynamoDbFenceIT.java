package dev.nolock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.FenceAuditor;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * {@link DynamoDbFence} on dynalite: a stale token writes nothing, and the same scenarios with an
 * unconditional {@code PutItem} (no fence) are caught by the same assertions (the negative
 * controls).
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbFenceIT {

  private static final String TABLE = DynamoDbTables.unique("nolock_fence_");
  private static final AtomicInteger ITEMS = new AtomicInteger();

  private static DynamoDbClient dynamo;
  private static SimpleMeterRegistry registry;
  private static DynamoDbFence fence;

  private final FenceAuditor auditor = new FenceAuditor();
  private String lock;
  private Map<String, AttributeValue> account;

  /** A protected write: the fence's, or the unconditional PutItem of the negative controls. */
  private interface Writer {
    Either<FenceRejection, Void> write(
        Lease lease, Map<String, AttributeValue> key, Map<String, AttributeValue> attributes);
  }

  private final Writer fenced = (lease, key, attributes) -> fence.put(lease, key, attributes);
  private final Writer unfenced =
      (lease, key, attributes) -> {
        Map<String, AttributeValue> item = new HashMap<>(attributes);
        item.putAll(key);
        dynamo.putItem(put -> put.tableName(TABLE).item(item));
        return Either.right(null);
      };

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    dynamo = client;
    registry = new SimpleMeterRegistry();
    fence =
        DynamoDbFence.create(
            dynamo, DynamoDbFenceConfig.custom(TABLE).metrics(registry, "accounts").build());
    // The fence needs no table of its own: it guards items of the user's table.
    DynamoDbVersionedStore.create(
            dynamo, DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build())
        .createTableIfMissing();
  }

  @AfterAll
  static void dropTable() {
    DynamoDbTables.drop(dynamo, TABLE);
  }

  @BeforeEach
  void freshItem() {
    int n = ITEMS.incrementAndGet();
    lock = "account-" + n;
    account = key("account-" + n);
  }

  @Test
  void aStaleTokenIsRefusedAndTheItemKeepsTheNewerHoldersValue() {
    runStaleHolderScenario(fenced);

    assertThat(auditor.attempts("A")).as("A's late write was attempted").isEqualTo(1);
    assertThat(auditor.refusals("A")).isEqualTo(1);
    auditor.assertNoStaleWriteAccepted();
    assertThat(item(account)).containsEntry("balance", AttributeValue.fromS("written by B"));
  }

  @Test
  void negativeControlWithoutTheFenceTheStaleWriteIsCaught() {
    runStaleHolderScenario(unfenced);

    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
    assertThat(item(account)).containsEntry("balance", AttributeValue.fromS("written by A"));
  }

  @Test
  void theRejectionNamesTheTokenAndOwnerThatWonAndIsCounted() {
    double before = rejections();
    write(fenced, lease("B", 34));

    Either<FenceRejection, Void> late = write(fenced, lease("A", 33));

    assertThat(late.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(33), "A", FencingToken.of(34), "B"));
    assertThat(rejections() - before).isEqualTo(1);
  }

  @Test
  void anEqualTokenFromAnotherOwnerIsRefusedButTheSameOwnerMayWriteAgain() {
    // A lease item deleted and re-created hands token 7 to B while A still writes with it.
    assertThat(write(fenced, lease("A", 7)).isRight()).isTrue();
    assertThat(write(fenced, lease("A", 7)).isRight()).as("same owner, same token").isTrue();

    Either<FenceRejection, Void> reissued = write(fenced, lease("B", 7));

    assertThat(auditor.attempts("B")).isEqualTo(1);
    assertThat(reissued.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(7), "B", FencingToken.of(7), "A"));
    assertThat(item(account)).containsEntry("balance", AttributeValue.fromS("written by A"));
    auditor.assertNoStaleWriteAccepted();
  }

  @Test
  void negativeControlWithoutTheFenceAnEqualTokenFromAnotherOwnerIsCaught() {
    write(unfenced, lease("A", 7));
    write(unfenced, lease("B", 7));

    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
  }

  @Test
  void aHigherTokenPassesAndTheItemRecordsTokenAndOwner() {
    assertThat(write(fenced, lease("A", 1)).isRight()).as("no fence yet").isTrue();
    assertThat(write(fenced, lease("B", 2)).isRight()).isTrue();

    assertThat(item(account))
        .containsEntry("fence_token", AttributeValue.fromN("2"))
        .containsEntry("fence_owner", AttributeValue.fromS("B"))
        .containsEntry("balance", AttributeValue.fromS("written by B"));
  }

  @Test
  void tokensAreComparedAsNumbersNotAsText() {
    assertThat(write(fenced, lease("A", 9)).isRight()).isTrue();
    assertThat(write(fenced, lease("B", 10)).isRight()).as("10 > 9").isTrue();

    assertThat(write(fenced, lease("A", 9)).isLeft()).as("9 < 10").isTrue();
    assertThat(item(account)).containsEntry("balance", AttributeValue.fromS("written by B"));
  }

  @Test
  void updateSetsOnlyTheNamedAttributesAndRefusesAStaleToken() {
    fence.put(lease("B", 5), account, Map.of("balance", AttributeValue.fromN("50")));

    Either<FenceRejection, Void> fresh =
        fence.update(
            lease("B", 5),
            account,
            Map.of("status", AttributeValue.fromS("open"), "name", AttributeValue.fromS("Bo")));
    auditor.attempted(lock, FencingToken.of(4), "A");
    Either<FenceRejection, Void> stale =
        fence.update(lease("A", 4), account, Map.of("status", AttributeValue.fromS("closed")));
    auditor.refused(lock, FencingToken.of(4), "A");

    assertThat(fresh.isRight()).as("reserved words as attribute names").isTrue();
    assertThat(stale.getLeft().currentToken()).isEqualTo(FencingToken.of(5));
    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThat(item(account))
        .containsEntry("balance", AttributeValue.fromN("50"))
        .containsEntry("status", AttributeValue.fromS("open"))
        .containsEntry("name", AttributeValue.fromS("Bo"));
  }

  @Test
  void anUpdateWithoutAttributesClaimsTheItemForTheNewHolder() {
    fence.put(lease("A", 1), account, Map.of("balance", AttributeValue.fromN("10")));
    assertThat(fence.update(lease("B", 2), account, Map.of()).isRight()).isTrue();

    Either<FenceRejection, Void> late =
        fence.put(lease("A", 1), account, Map.of("balance", AttributeValue.fromN("0")));

    assertThat(late.isLeft()).isTrue();
    assertThat(item(account)).containsEntry("balance", AttributeValue.fromN("10"));
  }

  /**
   * What "per-item" means, shown rather than claimed: the new holder has written one item only, so
   * a stale holder is refused there but can still write another item under the same lock. A lock
   * that guards several items needs a fence per lock name (the SQL {@code Fence}).
   */
  @Test
  void aPerItemFenceDoesNotGuardItemsTheNewHolderHasNotWrittenYet() {
    Map<String, AttributeValue> history = key(lock + "-history");
    write(fenced, lease("B", 34));

    Either<FenceRejection, Void> sameItem = write(fenced, lease("A", 33));
    Either<FenceRejection, Void> otherItem =
        fence.put(lease("A", 33), history, Map.of("entry", AttributeValue.fromS("by A")));

    assertThat(sameItem.isLeft()).isTrue();
    assertThat(otherItem.isRight()).as("the other item has no fence yet").isTrue();
  }

  @Test
  void dataAttributesMayNotNameTheFenceOrTheKey() {
    assertThatThrownBy(
            () ->
                fence.put(lease("A", 1), account, Map.of("fence_token", AttributeValue.fromN("9"))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("fence's own");
    assertThatThrownBy(
            () -> fence.update(lease("A", 1), account, Map.of("pk", AttributeValue.fromS("x"))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("part of the key");
    assertThatThrownBy(() -> fence.put(lease("A", 1), Map.of(), Map.of()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("partition key");
    assertThat(dynamo.getItem(get -> get.tableName(TABLE).key(account)).hasItem()).isFalse();
  }

  @Test
  void aFenceOnAMissingTableSaysWhichTable() {
    String missing = DynamoDbTables.unique("nolock_missing_");
    DynamoDbFence nowhere =
        DynamoDbFence.create(dynamo, DynamoDbFenceConfig.custom(missing).build());

    assertThatThrownBy(() -> nowhere.put(lease("A", 1), account, Map.of()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(missing);
  }

  /**
   * B (token 34) takes over and writes; A (token 33), paused past its lease, wakes and writes the
   * same item.
   */
  private void runStaleHolderScenario(Writer writer) {
    write(writer, lease("B", 34));
    write(writer, lease("A", 33));
  }

  private Either<FenceRejection, Void> write(Writer writer, Lease lease) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Either<FenceRejection, Void> result =
        writer.write(
            lease, account, Map.of("balance", AttributeValue.fromS("written by " + lease.owner())));
    if (result.isRight()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return result;
  }

  private static Map<String, AttributeValue> key(String id) {
    return Map.of("pk", AttributeValue.fromS(id));
  }

  private static Map<String, AttributeValue> item(Map<String, AttributeValue> key) {
    return dynamo.getItem(get -> get.tableName(TABLE).key(key).consistentRead(true)).item();
  }

  private double rejections() {
    return registry.get("nolock.fence.rejections").counter().count();
  }

  private Lease lease(String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
