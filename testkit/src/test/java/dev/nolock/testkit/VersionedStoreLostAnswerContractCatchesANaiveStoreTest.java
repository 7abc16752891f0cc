package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import org.junit.jupiter.api.Test;

/**
 * The lost-answer suite can fail: a store that resends a write whose answer was lost and believes
 * the resend's conflict, and one that "repairs" a refused resend by overwriting the key, are
 * caught; the sound store (it answers "unknown") passes.
 */
class VersionedStoreLostAnswerContractCatchesANaiveStoreTest {

  /** What a store does after a request or its answer was lost. */
  enum Reaction {
    /** Reports the outcome unknown ({@link BackendUnavailableException}): sound. */
    UNKNOWN,
    /** Sends the write again, as an SDK's retry would, and returns what the resend met. */
    RESEND,
    /** Sends it again, and when the resend is refused, writes over whatever the key holds now. */
    RESEND_AND_OVERWRITE
  }

  /** The server: keys with values and versions in memory, each request applied atomically. */
  static final class Server {
    private final Map<String, Versioned<Long>> rows = new HashMap<>();
    private long versions;

    synchronized Option<Versioned<Long>> read(String id) {
      return Option.of(rows.get(id));
    }

    synchronized Either<Conflict, Versioned<Long>> insert(String id, long value) {
      if (rows.containsKey(id)) {
        return Either.left(conflict(id));
      }
      return Either.right(put(id, value));
    }

    synchronized Either<Conflict, Versioned<Long>> compareAndSet(
        String id, Version expected, long value) {
      Versioned<Long> row = rows.get(id);
      if (row == null || !row.version().equals(expected)) {
        return Either.left(conflict(id));
      }
      return Either.right(put(id, value));
    }

    synchronized Either<Conflict, Version> delete(String id, Version expected) {
      Versioned<Long> row = rows.get(id);
      if (row == null || !row.version().equals(expected)) {
        return Either.left(conflict(id));
      }
      rows.remove(id);
      return Either.right(expected);
    }

    /** A write with no condition: the naive store's repair. */
    synchronized Versioned<Long> put(String id, long value) {
      Versioned<Long> row = new Versioned<>(value, Version.of(++versions));
      rows.put(id, row);
      return row;
    }

    synchronized void remove(String id) {
      rows.remove(id);
    }

    private Conflict conflict(String id) {
      return new Conflict(id, read(id).map(Versioned::version));
    }
  }

  /** One fault, armed for the next request of one operation. */
  static final class Fault implements InjectedFault {
    final VersionedStoreLostAnswerContract.Operation operation;
    final FaultKind kind;
    final Runnable meanwhile;
    final AtomicBoolean fired = new AtomicBoolean();

    Fault(
        VersionedStoreLostAnswerContract.Operation operation, FaultKind kind, Runnable meanwhile) {
      this.operation = operation;
      this.kind = kind;
      this.meanwhile = meanwhile;
    }

    @Override
    public boolean fired() {
      return fired.get();
    }

    @Override
    public String toString() {
      return kind + " on the next " + operation;
    }
  }

  /** A client of the server whose writes go through the armed faults. */
  static final class Client implements VersionedStore<String, Long> {
    private final Server server;
    private final Reaction reaction;
    private final List<Fault> armed = new CopyOnWriteArrayList<>();

    Client(Server server, Reaction reaction) {
      this.server = server;
      this.reaction = reaction;
    }

    Fault arm(
        VersionedStoreLostAnswerContract.Operation operation, FaultKind kind, Runnable meanwhile) {
      Fault fault = new Fault(operation, kind, meanwhile);
      armed.add(fault);
      return fault;
    }

    @Override
    public Option<Versioned<Long>> read(String id) {
      return server.read(id);
    }

    @Override
    public Either<Conflict, Versioned<Long>> insert(String id, Long value) {
      return send(
          VersionedStoreLostAnswerContract.Operation.INSERT,
          () -> server.insert(id, value),
          () -> server.put(id, value));
    }

    @Override
    public Either<Conflict, Versioned<Long>> compareAndSet(
        String id, Version expected, Long newValue) {
      return send(
          VersionedStoreLostAnswerContract.Operation.COMPARE_AND_SET,
          () -> server.compareAndSet(id, expected, newValue),
          () -> server.put(id, newValue));
    }

    @Override
    public Either<Conflict, Version> delete(String id, Version expected) {
      return send(
          VersionedStoreLostAnswerContract.Operation.DELETE,
          () -> server.delete(id, expected),
          () -> {
            server.remove(id);
            return expected;
          });
    }

    @Override
    public Either<Conflict, Versioned<Long>> update(String id, UnaryOperator<Long> change) {
      for (int attempt = 1; ; attempt++) {
        Option<Versioned<Long>> current = server.read(id);
        if (current.isEmpty()) {
          return Either.left(new Conflict(id, Option.none()));
        }
        long next = change.apply(current.get().value());
        Either<Conflict, Versioned<Long>> written =
            send(
                VersionedStoreLostAnswerContract.Operation.UPDATE,
                () -> server.compareAndSet(id, current.get().version(), next),
                () -> server.put(id, next));
        if (written.isRight() || written.getLeft().isMissing() || attempt == 10) {
          return written;
        }
      }
    }

    private <R> Either<Conflict, R> send(
        VersionedStoreLostAnswerContract.Operation operation,
        Supplier<Either<Conflict, R>> request,
        Supplier<R> overwrite) {
      Fault fault =
          armed.stream()
              .filter(f -> f.operation == operation && f.fired.compareAndSet(false, true))
              .findFirst()
              .orElse(null);
      if (fault == null) {
        return request.get();
      }
      armed.remove(fault);
      if (fault.kind == FaultKind.ANSWER_LOST) {
        request.get();
      }
      fault.meanwhile.run();
      return switch (reaction) {
        case UNKNOWN ->
            throw new BackendUnavailableException(
                "the connection dropped (" + fault + "): the outcome is unknown", null);
        case RESEND -> request.get();
        case RESEND_AND_OVERWRITE -> {
          Either<Conflict, R> resent = request.get();
          yield resent.isRight() ? resent : Either.right(overwrite.get());
        }
      };
    }
  }

  /** The suite on one in-memory server: {@link #store()} without faults, the client under test. */
  abstract static class InMemory extends VersionedStoreLostAnswerContract {
    private final Server server = new Server();
    private final Client healthy = new Client(server, Reaction.UNKNOWN);
    private final Client client = new Client(server, Objects.requireNonNull(reaction()));

    abstract Reaction reaction();

    @Override
    protected VersionedStore<String, Long> store() {
      return healthy;
    }

    @Override
    protected VersionedStore<String, Long> faultyStore() {
      return client;
    }

    @Override
    protected InjectedFault inject(Operation operation, FaultKind kind) {
      return client.arm(operation, kind, () -> {});
    }

    @Override
    protected InjectedFault inject(Operation operation, FaultKind kind, Runnable meanwhile) {
      return client.arm(operation, kind, meanwhile);
    }
  }

  /** Run only through the engine below (Surefire skips nested classes). */
  static class Sound extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.UNKNOWN;
    }
  }

  static class ResendsAndBelievesTheConflict extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.RESEND;
    }
  }

  static class ResendsAndOverwrites extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.RESEND_AND_OVERWRITE;
    }
  }

  @Test
  void aStoreThatAnswersUnknownPassesEveryCase() {
    var tests = ContractRuns.run(Sound.class);

    assertThat(ContractRuns.failures(tests)).isEmpty();
    assertThat(tests.succeeded().count()).as("13 cases x 2 fault kinds").isEqualTo(26);
  }

  @Test
  void aStoreThatBelievesItsResendsConflictIsCaughtOnEveryLostAnswer() {
    Map<String, String> failures =
        ContractRuns.failures(ContractRuns.run(ResendsAndBelievesTheConflict.class));

    assertThat(failures.keySet())
        .as("every case fails with ANSWER_LOST, none with REQUEST_LOST (the resend lands)")
        .hasSize(13)
        .allSatisfy(name -> assertThat(name).endsWith("ANSWER_LOST"));
    assertThat(
            failures.get("anInsertUnderAFaultIsSuccessOrUnknownAndLeavesItsValueOnce ANSWER_LOST"))
        .contains("insert under ANSWER_LOST answered conflict")
        .contains("a conflict for a write that was not refused");
    assertThat(failures.get("aDeleteUnderAFaultIsSuccessOrUnknownAndTheKeyIsGone ANSWER_LOST"))
        .contains("delete under ANSWER_LOST answered conflict");
    assertThat(
            failures.get(
                "anUpdateUnderAFaultRunsItsChangeAtMostOnceAndAddsItAtMostOnce ANSWER_LOST"))
        .contains("+10 applied at most once")
        .contains("120");
  }

  @Test
  void aStoreThatOverwritesAfterARefusedResendIsCaughtWhenAnotherWriterGotIn() {
    Map<String, String> failures =
        ContractRuns.failures(ContractRuns.run(ResendsAndOverwrites.class));

    assertThat(failures.keySet())
        .as("only the cases with another writer between the fault and the answer")
        .hasSize(9)
        .allSatisfy(name -> assertThat(name).contains("WhileAnotherWriter"));
    assertThat(
            failures.get(
                "aCompareAndSetUnderAFaultWhileAnotherWriterChangesTheKeyNeverOverwritesIt"
                    + " REQUEST_LOST"))
        .contains("a success overwrote the other writer");
    assertThat(
            failures.get(
                "anInsertUnderAFaultWhileAnotherWriterDeletesTheKeyNeverBringsItBack ANSWER_LOST"))
        .contains("the delete stands");
  }
}
