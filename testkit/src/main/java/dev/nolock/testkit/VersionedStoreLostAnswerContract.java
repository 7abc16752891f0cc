package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The contract of a {@link VersionedStore} when a write's request or answer is lost with the
 * connection ({@link FaultKind}), on {@code String} keys and {@code Long} values. A store's test
 * extends it and supplies two stores on the same data, one of them behind a fault injector ({@link
 * JdbcFaults}, {@link DynamoDbFaults}), and a way to arm one fault on one operation.
 *
 * <p>What it checks, for each operation and both kinds of fault:
 *
 * <ol>
 *   <li>The call answers success or "unknown" ({@link BackendUnavailableException}), never a {@link
 *       Conflict}: no write was refused. A success is what the key holds when read back.
 *   <li>A re-read shows the write at most once: after {@link FaultKind#ANSWER_LOST} (the server
 *       applied the first send) it landed; after {@link FaultKind#REQUEST_LOST} it landed or the
 *       key is as it was. {@code update(id, v -> v + 10)} from 100 runs its function at most once
 *       in the call and ends at 110 (or 100), never 120.
 *   <li>The caller's retry after the answer has exactly one more effect: {@code update} again adds
 *       10 once more; a write sent again with the same arguments is a {@link Conflict} with the
 *       version the key holds when the first send landed, and a success when it did not.
 *   <li>When another writer changes or deletes the key between the lost answer and the moment the
 *       caller hears of it (a resend of the store's own would come after it), the call answers
 *       "unknown", success only for a write that landed before the other writer's, a {@link
 *       Conflict} only for one that did not land; the other writer's change is never overwritten,
 *       and a key it deleted never comes back.
 * </ol>
 *
 * Every case asserts that its fault fired: a case whose fault never happened proves nothing. The
 * suite can fail: {@code VersionedStoreLostAnswerContractCatchesANaiveStoreTest} runs it on a store
 * that answers its own resent write with the conflict the resend met.
 */
public abstract class VersionedStoreLostAnswerContract {

  /** The write a fault is armed for. */
  public enum Operation {
    /** The request of {@link VersionedStore#insert}. */
    INSERT,
    /** The request of {@link VersionedStore#compareAndSet}. */
    COMPARE_AND_SET,
    /** The request of {@link VersionedStore#delete}. */
    DELETE,
    /** The conditional write of {@link VersionedStore#update} (not its read). */
    UPDATE
  }

  /** The store without faults: the cases set keys up and read them back through it. */
  protected abstract VersionedStore<String, Long> store();

  /** The store under test on the same data, every request sent through the fault injector. */
  protected abstract VersionedStore<String, Long> faultyStore();

  /**
   * Arms {@code kind} on the next request of {@code operation} sent by {@link #faultyStore()}.
   *
   * @return the armed fault, which the case asserts fired
   */
  protected abstract InjectedFault inject(Operation operation, FaultKind kind);

  /**
   * Like {@link #inject(Operation, FaultKind)}, and runs {@code meanwhile} when the fault fires:
   * after the server applied the request ({@link FaultKind#ANSWER_LOST}) or instead of it ({@link
   * FaultKind#REQUEST_LOST}), and before {@link #faultyStore()} sees the failure. {@code meanwhile}
   * writes through {@link #store()}.
   */
  protected abstract InjectedFault inject(Operation operation, FaultKind kind, Runnable meanwhile);

  private final String prefix = "la-" + UUID.randomUUID().toString().substring(0, 8) + "-";
  private final AtomicInteger ids = new AtomicInteger();

  protected String newId() {
    return prefix + ids.incrementAndGet();
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void anInsertUnderAFaultIsSuccessOrUnknownAndLeavesItsValueOnce(FaultKind kind) {
    String id = newId();
    InjectedFault fault = inject(Operation.INSERT, kind);

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().insert(id, 5L));

    assertFired(fault);
    answer.assertNoConflict("insert", kind);
    Option<Versioned<Long>> now = store().read(id);
    assertStored(answer, now);
    if (landed(kind, answer)) {
      assertThat(now.map(Versioned::value))
          .as("insert(5) under %s: the first send was applied, the key holds 5", kind)
          .contains(5L);
    } else {
      assertThat(now.isEmpty() || now.get().value() == 5L)
          .as(
              "insert(5) under %s answered unknown: the key is missing or holds 5, not %s",
              kind, now)
          .isTrue();
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCompareAndSetUnderAFaultIsSuccessOrUnknownAndLeavesANewVersion(FaultKind kind) {
    String id = newId();
    Versioned<Long> before = store().insert(id, 1L).get();
    InjectedFault fault = inject(Operation.COMPARE_AND_SET, kind);

    Answer<Versioned<Long>> answer =
        answer(() -> faultyStore().compareAndSet(id, before.version(), 2L));

    assertFired(fault);
    answer.assertNoConflict("compareAndSet", kind);
    Versioned<Long> now = store().read(id).get();
    assertStored(answer, Option.some(now));
    if (landed(kind, answer) || !now.equals(before)) {
      assertThat(now.value())
          .as("compareAndSet(1 -> 2) under %s landed: the value", kind)
          .isEqualTo(2L);
      assertThat(now.version())
          .as("compareAndSet under %s landed: the key has a new version", kind)
          .isNotEqualTo(before.version());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aDeleteUnderAFaultIsSuccessOrUnknownAndTheKeyIsGone(FaultKind kind) {
    String id = newId();
    Versioned<Long> before = store().insert(id, 1L).get();
    InjectedFault fault = inject(Operation.DELETE, kind);

    Answer<Version> answer = answer(() -> faultyStore().delete(id, before.version()));

    assertFired(fault);
    answer.assertNoConflict("delete", kind);
    Option<Versioned<Long>> now = store().read(id);
    if (answer.succeeded()) {
      assertThat(answer.result().get())
          .as("delete answers the deleted version")
          .isEqualTo(before.version());
    }
    if (landed(kind, answer)) {
      assertThat(now).as("delete under %s landed: the key is gone", kind).isEmpty();
    } else {
      assertThat(now.isEmpty() || now.get().equals(before))
          .as("delete under %s answered unknown: the key is gone or as it was, not %s", kind, now)
          .isTrue();
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void anUpdateUnderAFaultRunsItsChangeAtMostOnceAndAddsItAtMostOnce(FaultKind kind) {
    String id = newId();
    store().insert(id, 100L);
    AtomicInteger calls = new AtomicInteger();
    InjectedFault fault = inject(Operation.UPDATE, kind);

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().update(id, plusTen(calls)));

    assertFired(fault);
    Versioned<Long> now = store().read(id).get();
    assertThat(now.value())
        .as(
            "update(v -> v + 10) from 100 under %s: +10 applied at most once (answered %s)",
            kind, answer)
        .isIn(100L, 110L);
    assertThat(calls.get())
        .as("update under %s ran its change %s times in one call", kind, calls.get())
        .isLessThanOrEqualTo(1);
    answer.assertNoConflict("update", kind);
    assertStored(answer, Option.some(now));
    if (landed(kind, answer)) {
      assertThat(now.value()).as("update under %s landed: 100 + 10", kind).isEqualTo(110L);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCallersInsertSentAgainAfterAFaultIsAConflictWithTheVersionTheFirstWrote(FaultKind kind) {
    String id = newId();
    InjectedFault fault = inject(Operation.INSERT, kind);
    Answer<Versioned<Long>> first = answer(() -> faultyStore().insert(id, 5L));
    assertFired(fault);
    first.assertNoConflict("insert", kind);
    Option<Versioned<Long>> afterFirst = store().read(id);

    Either<Conflict, Versioned<Long>> again = faultyStore().insert(id, 5L);

    if (afterFirst.isDefined()) {
      assertThat(again.isLeft())
          .as("insert sent again after the first landed (%s): a conflict, got %s", first, again)
          .isTrue();
      assertThat(again.getLeft().current()).contains(afterFirst.get().version());
      assertThat(store().read(id)).contains(afterFirst.get());
    } else {
      assertThat(again.isRight())
          .as("insert sent again after the first did not land: inserted, got %s", again)
          .isTrue();
      assertThat(store().read(id)).contains(again.get());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCallersCompareAndSetSentAgainWithTheOldVersionIsAConflictWhenTheFirstLanded(
      FaultKind kind) {
    String id = newId();
    Versioned<Long> before = store().insert(id, 1L).get();
    InjectedFault fault = inject(Operation.COMPARE_AND_SET, kind);
    Answer<Versioned<Long>> first =
        answer(() -> faultyStore().compareAndSet(id, before.version(), 2L));
    assertFired(fault);
    first.assertNoConflict("compareAndSet", kind);
    Versioned<Long> afterFirst = store().read(id).get();

    Either<Conflict, Versioned<Long>> again = faultyStore().compareAndSet(id, before.version(), 2L);

    if (!afterFirst.equals(before)) {
      assertThat(again.isLeft())
          .as(
              "compareAndSet sent again with the old version after the first landed (%s): a"
                  + " conflict, got %s",
              first, again)
          .isTrue();
      assertThat(again.getLeft().current()).contains(afterFirst.version());
      assertThat(store().read(id)).contains(afterFirst);
    } else {
      assertThat(again.isRight())
          .as("compareAndSet sent again after the first did not land: written, got %s", again)
          .isTrue();
      assertThat(store().read(id)).contains(again.get());
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCallersDeleteSentAgainAfterAFaultFindsTheKeyMissingWhenTheFirstLanded(FaultKind kind) {
    String id = newId();
    Versioned<Long> before = store().insert(id, 1L).get();
    InjectedFault fault = inject(Operation.DELETE, kind);
    Answer<Version> first = answer(() -> faultyStore().delete(id, before.version()));
    assertFired(fault);
    first.assertNoConflict("delete", kind);
    boolean gone = store().read(id).isEmpty();

    Either<Conflict, Version> again = faultyStore().delete(id, before.version());

    if (gone) {
      assertThat(again.isLeft() && again.getLeft().isMissing())
          .as(
              "delete sent again after the first landed (%s): a conflict, missing; got %s",
              first, again)
          .isTrue();
    } else {
      assertThat(again)
          .as("delete sent again after the first did not land")
          .contains(before.version());
    }
    assertThat(store().read(id)).isEmpty();
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCallersUpdateAfterAFaultAddsExactlyOneMoreEffect(FaultKind kind) {
    String id = newId();
    store().insert(id, 100L);
    AtomicInteger calls = new AtomicInteger();
    InjectedFault fault = inject(Operation.UPDATE, kind);
    Answer<Versioned<Long>> first = answer(() -> faultyStore().update(id, plusTen(calls)));
    assertFired(fault);
    first.assertNoConflict("update", kind);
    long afterFirst = store().read(id).get().value();
    assertThat(afterFirst).as("the first update under %s (%s)", kind, first).isIn(100L, 110L);

    Either<Conflict, Versioned<Long>> again = faultyStore().update(id, plusTen(calls));

    assertThat(again.isRight()).as("update called again with no fault: %s", again).isTrue();
    assertThat(again.get().value()).isEqualTo(afterFirst + 10);
    assertThat(store().read(id).get())
        .as(
            "the first update (%s) and the caller's second: one effect each, %s landed",
            first, afterFirst == 110L ? "both" : "only the second")
        .isEqualTo(again.get());
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void anInsertUnderAFaultWhileAnotherWriterChangesTheKeyNeverOverwritesIt(FaultKind kind) {
    String id = newId();
    AtomicReference<Versioned<Long>> other = new AtomicReference<>();
    InjectedFault fault = inject(Operation.INSERT, kind, () -> other.set(writeOther(id, 99L)));

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().insert(id, 5L));

    assertFired(fault);
    assertOvertakenAnswer("insert", kind, answer);
    assertThat(store().read(id))
        .as("insert under %s answered %s: the other writer's 99 stays", kind, answer)
        .contains(other.get());
  }

  /**
   * The key's whole life passes between the lost answer and the caller hearing of it: another
   * writer deletes the inserted key (or, when the request was lost, inserts and deletes it). A
   * resend of the insert then finds the key missing again and would bring back a value the other
   * writer deleted.
   */
  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void anInsertUnderAFaultWhileAnotherWriterDeletesTheKeyNeverBringsItBack(FaultKind kind) {
    String id = newId();
    InjectedFault fault =
        inject(
            Operation.INSERT,
            kind,
            () -> {
              Versioned<Long> seen =
                  store().read(id).getOrElse(() -> store().insert(id, 99L).get());
              assertThat(store().delete(id, seen.version()).isRight())
                  .as("the other writer deletes the key")
                  .isTrue();
            });

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().insert(id, 5L));

    assertFired(fault);
    answer.assertNoConflict("insert", kind);
    Option<Versioned<Long>> now = store().read(id);
    if (kind == FaultKind.ANSWER_LOST) {
      assertThat(now)
          .as(
              "insert(5) under %s landed, then another writer deleted the key: the delete stands,"
                  + " the insert is not applied a second time (answered %s)",
              kind, answer)
          .isEmpty();
    } else {
      assertStored(answer, now);
      assertThat(now.isEmpty() || now.get().value() == 5L)
          .as(
              "insert(5) under %s answered %s: the key is missing or holds 5, not %s",
              kind, answer, now)
          .isTrue();
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aCompareAndSetUnderAFaultWhileAnotherWriterChangesTheKeyNeverOverwritesIt(FaultKind kind) {
    String id = newId();
    Version v1 = store().insert(id, 1L).get().version();
    AtomicReference<Versioned<Long>> other = new AtomicReference<>();
    InjectedFault fault =
        inject(
            Operation.COMPARE_AND_SET,
            kind,
            () -> {
              Versioned<Long> seen = store().read(id).get();
              other.set(store().compareAndSet(id, seen.version(), seen.value() * 10).get());
            });

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().compareAndSet(id, v1, 2L));

    assertFired(fault);
    assertOvertakenAnswer("compareAndSet", kind, answer);
    assertThat(store().read(id))
        .as(
            "compareAndSet(1 -> 2) under %s answered %s: the other writer's x10 stays on top",
            kind, answer)
        .contains(other.get());
    assertThat(other.get().value()).isEqualTo(kind == FaultKind.ANSWER_LOST ? 20L : 10L);
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void aDeleteUnderAFaultWhileAnotherWriterChangesTheKeyNeverRemovesItsWrite(FaultKind kind) {
    String id = newId();
    Version v1 = store().insert(id, 1L).get().version();
    AtomicReference<Versioned<Long>> other = new AtomicReference<>();
    InjectedFault fault = inject(Operation.DELETE, kind, () -> other.set(writeOther(id, 99L)));

    Answer<Version> answer = answer(() -> faultyStore().delete(id, v1));

    assertFired(fault);
    assertOvertakenAnswer("delete", kind, answer);
    assertThat(store().read(id))
        .as("delete under %s answered %s: the other writer's 99 stays", kind, answer)
        .contains(other.get());
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(FaultKind.class)
  void anUpdateUnderAFaultWhileAnotherWriterChangesTheKeyAppliesEachChangeOnce(FaultKind kind) {
    String id = newId();
    store().insert(id, 100L);
    AtomicInteger calls = new AtomicInteger();
    AtomicReference<Versioned<Long>> other = new AtomicReference<>();
    InjectedFault fault =
        inject(
            Operation.UPDATE,
            kind,
            () -> {
              Versioned<Long> seen = store().read(id).get();
              other.set(store().compareAndSet(id, seen.version(), seen.value() + 1).get());
            });

    Answer<Versioned<Long>> answer = answer(() -> faultyStore().update(id, plusTen(calls)));

    assertFired(fault);
    Versioned<Long> now = store().read(id).get();
    if (kind == FaultKind.ANSWER_LOST) {
      assertThat(now)
          .as(
              "update(+10) under %s, then another writer's +1: 111, each once (answered %s)",
              kind, answer)
          .isEqualTo(other.get());
      assertThat(now.value()).isEqualTo(111L);
      assertThat(calls).as("the change ran once in the call").hasValue(1);
      answer.assertNoConflict("update", kind);
    } else if (answer.succeeded()) {
      // The first send never landed; a store may read the other writer's 101 and apply +10 to it.
      assertThat(now)
          .as("update(+10) under %s answered success", kind)
          .isEqualTo(answer.result().get());
      assertThat(now.value()).as("the other writer's +1 and this +10, each once").isEqualTo(111L);
    } else {
      assertThat(now)
          .as("update(+10) under %s answered %s: the other writer's +1 alone", kind, answer)
          .isEqualTo(other.get());
      assertThat(now.value()).isEqualTo(101L);
    }
  }

  /**
   * Sets {@code id} to {@code value} through {@link #store()}: inserts it when missing, or
   * compares-and-sets it on the version it holds.
   */
  private Versioned<Long> writeOther(String id, long value) {
    Option<Versioned<Long>> seen = store().read(id);
    Either<Conflict, Versioned<Long>> written =
        seen.isEmpty()
            ? store().insert(id, value)
            : store().compareAndSet(id, seen.get().version(), value);
    assertThat(written.isRight()).as("the other writer's write: %s", written).isTrue();
    return written.get();
  }

  /**
   * A write overtaken by another writer: after {@link FaultKind#ANSWER_LOST} it landed first, so it
   * is success or unknown, never a conflict; after {@link FaultKind#REQUEST_LOST} it never landed
   * and the other writer's change stands in its way, so it is a conflict or unknown, never success.
   */
  private static void assertOvertakenAnswer(String call, FaultKind kind, Answer<?> answer) {
    if (kind == FaultKind.ANSWER_LOST) {
      answer.assertNoConflict(call, kind);
    } else {
      assertThat(answer.succeeded())
          .as(
              "%s under %s, another writer's change before the caller heard: the first send never"
                  + " landed, so a success overwrote the other writer (answered %s)",
              call, kind, answer)
          .isFalse();
    }
  }

  /**
   * Whether the write certainly landed: the store answered success, or the fault was {@link
   * FaultKind#ANSWER_LOST}, whose first send the server applied.
   */
  private static boolean landed(FaultKind kind, Answer<?> answer) {
    return kind == FaultKind.ANSWER_LOST || answer.succeeded();
  }

  private static UnaryOperator<Long> plusTen(AtomicInteger calls) {
    return v -> {
      calls.incrementAndGet();
      return v + 10;
    };
  }

  private static void assertFired(InjectedFault fault) {
    assertThat(fault.fired())
        .as("%s fired: the call under test went through the injector", fault)
        .isTrue();
  }

  /** A success answered what the key holds now. */
  private static void assertStored(Answer<Versioned<Long>> answer, Option<Versioned<Long>> now) {
    if (answer.succeeded()) {
      assertThat(now)
          .as("the success %s is what the key holds", answer)
          .contains(answer.result().get());
    }
  }

  private static <R> Answer<R> answer(Supplier<Either<Conflict, R>> call) {
    try {
      return new Answer<>(call.get(), null);
    } catch (BackendUnavailableException unknown) {
      return new Answer<>(null, unknown);
    }
  }

  /** What the caller heard: a result, or "unknown" (a {@link BackendUnavailableException}). */
  private record Answer<R>(Either<Conflict, R> result, BackendUnavailableException unknown) {

    boolean succeeded() {
      return result != null && result.isRight();
    }

    void assertNoConflict(String call, FaultKind kind) {
      assertThat(result == null || result.isRight())
          .as(
              "%s under %s answered %s: a conflict for a write that was not refused (the"
                  + " store's own resend met its first send); expected success or"
                  + " BackendUnavailableException (unknown)",
              call, kind, this)
          .isTrue();
    }

    @Override
    public String toString() {
      if (result == null) {
        return "unknown (" + unknown.getMessage() + ")";
      }
      return result.isRight() ? "success " + result.get() : "conflict " + result.getLeft();
    }
  }
}
