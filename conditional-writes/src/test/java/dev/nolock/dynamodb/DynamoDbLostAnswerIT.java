package dev.nolock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.FaultKind;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The store and the fence after a lost answer (the server applied the write, the client never heard
 * back) and a lost request, on dynalite through {@link DynamoDbFaults}: every call reports what
 * happened, or that the outcome is unknown ({@link BackendUnavailableException}); never a conflict
 * or a fence rejection for a write that landed, and never a change function applied twice. The
 * store's single-write cases, with and without another writer in between, are the shared contract
 * ({@code DynamoDbVersionedStoreLostAnswerIT}); here are what only this module has: its own
 * resends, and the fence.
 *
 * <p>The store and fence under test send through the faulty client; the checks and the other
 * writers use a plain client.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbLostAnswerIT {

  private static final String TABLE = DynamoDbTables.unique("nolock_lost_");

  private static DynamoDbClient plain;
  private static DynamoDbVersionedStore<Long> checker;
  private static DynamoDbFence otherFence;

  private DynamoDbFaults faults;
  private DynamoDbVersionedStore<Long> store;
  private DynamoDbFence fence;
  private String id;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    plain = client;
    checker =
        DynamoDbVersionedStore.create(
            plain, DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build());
    checker.createTableIfMissing();
    otherFence = DynamoDbFence.create(plain, DynamoDbFenceConfig.custom(TABLE).build());
  }

  @AfterAll
  static void dropTable() {
    DynamoDbTables.drop(plain, TABLE);
  }

  @BeforeEach
  void faultyClient() {
    faults = DynamoDbFaults.create();
    store =
        DynamoDbVersionedStore.create(
            faults.client(),
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build());
    fence = DynamoDbFence.create(faults.client(), DynamoDbFenceConfig.custom(TABLE).build());
    id = "item-" + UUID.randomUUID();
  }

  @AfterEach
  void closeFaults() {
    faults.close();
  }

  /**
   * The shared contract allows "unknown" here; this store resends, finds its own rvn in the item
   * and reports the write it made.
   */
  @Test
  void aCompareAndSetWhoseAnswerWasLostIsResentAndReportedAsItsOwnWrite() {
    Version v1 = checker.insert(id, 1L).get().version();
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    Either<?, Versioned<Long>> swapped = attempt(() -> store.compareAndSet(id, v1, 2L));

    lost.assertRetried();
    assertThat(describe(swapped)).as("the resend found this call's rvn").isEqualTo("written");
    assertThat(swapped.get())
        .as("the version it reports is the one stored")
        .isEqualTo(checker.read(id).get());
    assertThat(swapped.get().value()).isEqualTo(2L);
  }

  @Test
  void aWriteWhoseEveryAttemptLostItsAnswerIsSentThreeTimesThenUnknown() {
    Version v1 = checker.insert(id, 1L).get().version();
    DynamoDbFaults.Fault first = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);
    faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);
    faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);
    DynamoDbFaults.Fault fourth = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    String outcome = outcome(() -> store.compareAndSet(id, v1, 2L));

    assertThat(outcome).isEqualTo("unknown");
    assertThat(first.attempts())
        .as("three attempts, each sent once: the SDK's own retries are off for them")
        .isEqualTo(3);
    assertThat(fourth.fired()).isFalse();
    assertThat(checker.read(id).get().value()).as("the first attempt landed").isEqualTo(2L);
  }

  @Test
  void lostRequestsAreResentByTheLibraryAndLandOnce() {
    Versioned<Long> inserted = checker.insert(id, 1L).get();
    DynamoDbFaults.Fault swapLost = faults.onNext("UpdateItem", FaultKind.REQUEST_LOST);
    Versioned<Long> updated = store.update(id, b -> b + 1).get();
    DynamoDbFaults.Fault deleteLost = faults.onNext("DeleteItem", FaultKind.REQUEST_LOST);
    Either<?, Version> deleted = store.delete(id, updated.version());

    swapLost.assertRetried();
    deleteLost.assertRetried();
    assertThat(updated.value()).isEqualTo(inserted.value() + 1);
    assertThat(deleted.get()).isEqualTo(updated.version());
    assertThat(checker.read(id).isEmpty()).isTrue();
  }

  /**
   * An insert is never resent after no answer: its condition holds again once another writer
   * deleted what it inserted. A lost request is then "unknown", the price of never inserting twice.
   */
  @Test
  void anInsertWhoseRequestWasLostIsNotResentAndIsUnknown() {
    DynamoDbFaults.Fault lost = faults.onNext("PutItem", FaultKind.REQUEST_LOST);

    String outcome = outcome(() -> store.insert(id, 1L));

    lost.assertFired();
    assertThat(lost.attempts()).as("sent once").isEqualTo(1);
    assertThat(outcome).isEqualTo("unknown");
    assertThat(checker.read(id).isEmpty()).isTrue();
    assertThat(store.insert(id, 1L).isRight()).as("the caller's retry inserts").isTrue();
  }

  @Test
  void aFencedWriteWhoseAnswerWasLostAndThatANewerTokenOvertookIsUnknownNotRejected() {
    Map<String, AttributeValue> key = Map.of("pk", AttributeValue.fromS(id));
    // B (token 6) takes over and writes between A's lost answer and A's resend.
    DynamoDbFaults.Fault lost =
        faults.onNext(
            "UpdateItem",
            FaultKind.ANSWER_LOST,
            () -> otherFence.update(lease("B", 6), key, Map.of("by", AttributeValue.fromS("B"))));

    String outcome =
        outcome(() -> fence.update(lease("A", 5), key, Map.of("by", AttributeValue.fromS("A"))));

    lost.assertRetried();
    assertThat(outcome)
        .as("A's first send landed; its resend met B's token: written or unknown, not rejected")
        .isIn("written", "unknown");
    assertThat(item(key))
        .containsEntry("by", AttributeValue.fromS("B"))
        .containsEntry("fence_token", AttributeValue.fromN("6"));
  }

  @Test
  void aFencedWriteWhoseAnswerWasLostIsResentAndWritten() {
    Map<String, AttributeValue> key = Map.of("pk", AttributeValue.fromS(id));
    DynamoDbFaults.Fault lost = faults.onNext("PutItem", FaultKind.ANSWER_LOST);

    Either<FenceRejection, Void> written =
        fence.put(lease("A", 5), key, Map.of("by", AttributeValue.fromS("A")));

    lost.assertRetried();
    assertThat(written.isRight()).as("the resend of the same token and owner passes").isTrue();
    assertThat(item(key)).containsEntry("by", AttributeValue.fromS("A"));
  }

  /** "written", "conflict ..." / "rejected ...", or "unknown" (BackendUnavailableException). */
  private static <L, R> String outcome(Supplier<Either<L, R>> call) {
    return describe(attempt(call));
  }

  /** The call's result, or null when it threw {@link BackendUnavailableException}. */
  private static <L, R> Either<L, R> attempt(Supplier<Either<L, R>> call) {
    try {
      return call.get();
    } catch (BackendUnavailableException unknown) {
      return null;
    }
  }

  private static String describe(Either<?, ?> result) {
    if (result == null) {
      return "unknown";
    }
    return result.isRight() ? "written" : "refused: " + result.getLeft();
  }

  private Lease lease(String owner, long token) {
    return new Lease(
        id,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }

  private static Map<String, AttributeValue> item(Map<String, AttributeValue> key) {
    return plain.getItem(get -> get.tableName(TABLE).key(key).consistentRead(true)).item();
  }
}
