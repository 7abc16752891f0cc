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
import java.util.concurrent.atomic.AtomicInteger;
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
 * or a fence rejection for a write that landed, and never a change function applied twice.
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

  @Test
  void anUpdateWhoseAnswerWasLostAppliesTheChangeOnce() {
    checker.insert(id, 100L);
    AtomicInteger applied = new AtomicInteger();
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    String outcome =
        outcome(
            () ->
                store.update(
                    id,
                    b -> {
                      applied.incrementAndGet();
                      return b + 10;
                    }));

    lost.assertRetried();
    assertThat(checker.read(id).get().value())
        .as("update(id, b -> b + 10) on 100, its answer lost and its write resent, adds 10 once")
        .isEqualTo(110L);
    assertThat(applied).as("the change function ran once").hasValue(1);
    assertThat(outcome).isIn("written", "unknown");
  }

  @Test
  void aCompareAndSetWhoseAnswerWasLostReportsItsOwnWriteNotAConflict() {
    Version v1 = checker.insert(id, 1L).get().version();
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    Either<?, Versioned<Long>> swapped = attempt(() -> store.compareAndSet(id, v1, 2L));

    lost.assertRetried();
    assertThat(describe(swapped))
        .as("a compare-and-set that landed, its answer lost, is reported as written or unknown")
        .isIn("written", "unknown");
    Versioned<Long> now = checker.read(id).get();
    assertThat(now.value()).isEqualTo(2L);
    if (swapped != null) {
      assertThat(swapped.get()).as("the version it reports is the one stored").isEqualTo(now);
    }
  }

  @Test
  void anInsertWhoseAnswerWasLostReportsItsOwnInsertNotAConflict() {
    DynamoDbFaults.Fault lost = faults.onNext("PutItem", FaultKind.ANSWER_LOST);

    Either<?, Versioned<Long>> inserted = attempt(() -> store.insert(id, 7L));

    lost.assertRetried();
    assertThat(describe(inserted))
        .as("an insert that landed, its answer lost, is reported as written or unknown")
        .isIn("written", "unknown");
    Versioned<Long> now = checker.read(id).get();
    assertThat(now.value()).isEqualTo(7L);
    if (inserted != null) {
      assertThat(inserted.get()).isEqualTo(now);
    }
  }

  @Test
  void aDeleteWhoseAnswerWasLostIsUnknownNotAConflict() {
    Version v1 = checker.insert(id, 1L).get().version();
    DynamoDbFaults.Fault lost = faults.onNext("DeleteItem", FaultKind.ANSWER_LOST);

    String outcome = outcome(() -> store.delete(id, v1));

    lost.assertRetried();
    assertThat(outcome)
        .as("a delete that landed, its answer lost, is reported as deleted or unknown")
        .isIn("written", "unknown");
    assertThat(checker.read(id).isEmpty()).isTrue();
  }

  @Test
  void aCompareAndSetWhoseAnswerWasLostAndThatAnotherWriterOvertookIsUnknown() {
    Version v1 = checker.insert(id, 1L).get().version();
    // Between the lost answer and the resend, another writer builds on the value that landed.
    DynamoDbFaults.Fault lost =
        faults.onNext(
            "UpdateItem",
            FaultKind.ANSWER_LOST,
            () -> {
              Versioned<Long> landed = checker.read(id).get();
              checker.compareAndSet(id, landed.version(), landed.value() * 10);
            });

    String outcome = outcome(() -> store.compareAndSet(id, v1, 2L));

    lost.assertRetried();
    assertThat(outcome)
        .as("the resend meets the other writer's version: written or unknown, not a conflict")
        .isIn("written", "unknown");
    assertThat(checker.read(id).get().value()).as("both writes landed, once each").isEqualTo(20L);
  }

  @Test
  void anUpdateWhoseAnswerWasLostAndThatAnotherWriterOvertookIsUnknownAndRunsTheChangeOnce() {
    checker.insert(id, 100L);
    AtomicInteger applied = new AtomicInteger();
    faults.onNext(
        "UpdateItem",
        FaultKind.ANSWER_LOST,
        () -> {
          Versioned<Long> landed = checker.read(id).get();
          checker.compareAndSet(id, landed.version(), landed.value() + 1);
        });

    String outcome =
        outcome(
            () ->
                store.update(
                    id,
                    b -> {
                      applied.incrementAndGet();
                      return b + 10;
                    }));

    assertThat(checker.read(id).get().value())
        .as("b -> b + 10 landed once, and the other writer's + 1 on top of it")
        .isEqualTo(111L);
    assertThat(applied).as("the change function ran once").hasValue(1);
    assertThat(outcome)
        .as("the resend met the other writer's version: unknown, not a retry")
        .isEqualTo("unknown");
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
    DynamoDbFaults.Fault insertLost = faults.onNext("PutItem", FaultKind.REQUEST_LOST);
    Versioned<Long> inserted = store.insert(id, 1L).get();
    DynamoDbFaults.Fault swapLost = faults.onNext("UpdateItem", FaultKind.REQUEST_LOST);
    Versioned<Long> updated = store.update(id, b -> b + 1).get();
    DynamoDbFaults.Fault deleteLost = faults.onNext("DeleteItem", FaultKind.REQUEST_LOST);
    Either<?, Version> deleted = store.delete(id, updated.version());

    insertLost.assertRetried();
    swapLost.assertRetried();
    deleteLost.assertRetried();
    assertThat(inserted.value()).isEqualTo(1L);
    assertThat(updated.value()).isEqualTo(2L);
    assertThat(deleted.get()).isEqualTo(updated.version());
    assertThat(checker.read(id).isEmpty()).isTrue();
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
