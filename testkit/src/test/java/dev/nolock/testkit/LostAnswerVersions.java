package dev.nolock.testkit;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;

/**
 * A {@link VersionedStore} client of an {@link InMemoryVersions} whose writes go through armed
 * faults: the subject of the versioned-store negative controls ({@link
 * VersionedStoreLostAnswerContract}, {@link VersionedStoreProperties}). A fault loses the answer
 * (the server applied the request) or the request of the next write of one operation; what the
 * client does then is its {@link Reaction}, on the operations it is given, and {@link
 * Reaction#UNKNOWN} on the others.
 */
final class LostAnswerVersions implements VersionedStore<String, Long> {

  /** The writes a fault can be armed for; the suites' own enums map to it by name. */
  enum Operation {
    INSERT,
    COMPARE_AND_SET,
    DELETE,
    UPDATE;

    static Operation of(Enum<?> suiteOperation) {
      return valueOf(suiteOperation.name());
    }
  }

  /** What a client does after a request or its answer was lost. */
  enum Reaction {
    /** Reports the outcome unknown ({@link BackendUnavailableException}): sound. */
    UNKNOWN,
    /**
     * Sends the write again, as an SDK's retry would, and returns what the resend met: a resent
     * compare-and-set that landed answers {@link Conflict}, and {@code update} takes that conflict
     * for another writer's and applies its change again.
     */
    RESEND,
    /** Sends it again, and when the resend is refused, writes over whatever the key holds now. */
    RESEND_AND_OVERWRITE
  }

  /** One fault, armed for the next request of one operation. */
  static final class Fault implements InjectedFault {
    final Operation operation;
    final FaultKind kind;
    final Runnable meanwhile;
    final AtomicBoolean fired = new AtomicBoolean();

    Fault(Operation operation, FaultKind kind, Runnable meanwhile) {
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

  private final InMemoryVersions server;
  private final Reaction reaction;
  private final Set<Operation> reactingOn;
  private final List<Fault> armed = new CopyOnWriteArrayList<>();

  /** A client that reacts to a lost answer of any operation with {@code reaction}. */
  LostAnswerVersions(InMemoryVersions server, Reaction reaction) {
    this(server, reaction, EnumSet.allOf(Operation.class));
  }

  /** A client that reacts with {@code reaction} on {@code reactingOn}, soundly on the others. */
  LostAnswerVersions(InMemoryVersions server, Reaction reaction, Set<Operation> reactingOn) {
    this.server = server;
    this.reaction = reaction;
    this.reactingOn = EnumSet.copyOf(reactingOn);
  }

  /** Arms {@code kind} for the next request of {@code operation} (a suite's enum constant). */
  Fault arm(Enum<?> operation, FaultKind kind, Runnable meanwhile) {
    Fault fault = new Fault(Operation.of(operation), kind, meanwhile);
    armed.add(fault);
    return fault;
  }

  /** Drops the faults that never fired (their call sent no request, e.g. an update of no key). */
  void disarmAll() {
    armed.clear();
  }

  @Override
  public Option<Versioned<Long>> read(String id) {
    return server.read(id);
  }

  @Override
  public Either<Conflict, Versioned<Long>> insert(String id, Long value) {
    return send(Operation.INSERT, () -> server.insert(id, value), () -> server.put(id, value));
  }

  @Override
  public Either<Conflict, Versioned<Long>> compareAndSet(
      String id, Version expected, Long newValue) {
    return send(
        Operation.COMPARE_AND_SET,
        () -> server.compareAndSet(id, expected, newValue),
        () -> server.put(id, newValue));
  }

  @Override
  public Either<Conflict, Version> delete(String id, Version expected) {
    return send(
        Operation.DELETE,
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
              Operation.UPDATE,
              () -> server.compareAndSet(id, current.get().version(), next),
              () -> server.put(id, next));
      if (written.isRight() || written.getLeft().isMissing() || attempt == 10) {
        return written;
      }
    }
  }

  private <R> Either<Conflict, R> send(
      Operation operation, Supplier<Either<Conflict, R>> request, Supplier<R> overwrite) {
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
    return switch (reactingOn.contains(operation) ? reaction : Reaction.UNKNOWN) {
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
