package dev.nolock.testkit;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.internal.CensusHook;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

/**
 * A stateful property of a {@link VersionedStore} of {@code Long} values against its real server:
 * jqwik action chains of insert, compareAndSet, delete, update(+k) and read over two keys, each
 * write with no fault, a lost answer or a lost request, checked against a model of the states each
 * key may be in.
 *
 * <p>The model keeps, per key, the set of possible states (absent, or a value at a version, the
 * version unknown when an unanswered write may have made it) and every version the key has had.
 * Each answer must be possible in one of them, and narrows the set; "unknown" widens it to "applied
 * or not". Checked after each action:
 *
 * <ol>
 *   <li>No false definite outcome: a success the model rules out, or a {@link Conflict} for a write
 *       the model says must have succeeded (the lost answer of a write that landed).
 *   <li>{@code update} applies its change once per call: its result and every re-read are the old
 *       value plus k, never plus 2k.
 *   <li>Versions never repeat for a key, also across a delete and a re-insert.
 *   <li>A read matches one of the possible states.
 *   <li>After the run, each fault (operation × {@link FaultKind}) fired at least {@link
 *       ActionCensus#MIN_PER_FAULT_KIND} times; the census is printed.
 * </ol>
 *
 * <p>Tries: {@link #defaultTries()}, or {@code -Dnolock.property.tries=N}.
 */
public abstract class VersionedStoreProperties implements CensusHook.Censused {

  /** What a fault loses the answer (or the request) of. */
  public enum Operation {
    INSERT,
    COMPARE_AND_SET,
    DELETE,
    UPDATE
  }

  /** A store with no fault on its path, on the same table as {@link #faultyStore()}. */
  protected abstract VersionedStore<String, Long> store();

  /** The store whose requests {@link #inject} faults. */
  protected abstract VersionedStore<String, Long> faultyStore();

  /** Arms one fault on the next request of {@code op} that {@link #faultyStore()} sends. */
  protected abstract InjectedFault inject(Operation op, FaultKind kind);

  @Override
  public int defaultTries() {
    return 20; // an update of an absent key sends nothing: its faults fire about one time in four
  }

  /** Actions per chain. */
  protected int actionsPerChain() {
    return 20;
  }

  private final FaultCensus census = new FaultCensus(Operation.values());

  @Override
  public final ActionCensus startCensus() {
    return census.start();
  }

  @Property(shrinking = net.jqwik.api.ShrinkingMode.BOUNDED)
  @AddLifecycleHook(CensusHook.class)
  public void everyAnswerIsPossible(@ForAll("storeChains") ActionChain<Model> chain) {
    chain.run();
  }

  @Provide
  public Arbitrary<ActionChain<Model>> storeChains() {
    return ActionChain.<Model>startWith(Model::new)
        .withAction(4, new Write(Operation.INSERT))
        .withAction(4, new Write(Operation.COMPARE_AND_SET))
        .withAction(3, new Write(Operation.DELETE))
        .withAction(9, new Write(Operation.UPDATE))
        .withAction(2, new Read())
        .withMaxTransformations(actionsPerChain());
  }

  /** One possible state of a key: absent, or a value at a version (null: one not seen yet). */
  record State(boolean exists, long value, String version) {
    static final State ABSENT = new State(false, 0, null);
  }

  /** The possible states of each key of one chain. */
  public final class Model {
    private final String prefix = "props-" + UUID.randomUUID().toString().substring(0, 8) + "-";
    private final List<String> keys = List.of(prefix + "a", prefix + "b");
    private final Map<String, Set<State>> possible =
        new java.util.HashMap<>(Map.of(keys.get(0), initial(), keys.get(1), initial()));
    private final Map<String, Set<String>> seen =
        Map.of(keys.get(0), new HashSet<>(), keys.get(1), new HashSet<>());
    private final VersionedStore<String, Long> faulty = faultyStore();
    private final VersionedStore<String, Long> plain = store();

    private Set<State> initial() {
      Set<State> states = new LinkedHashSet<>();
      states.add(State.ABSENT);
      return states;
    }

    /** A version to name: the current one when known, else any the key had. */
    Version someVersion(String key) {
      for (State s : possible.get(key)) {
        if (s.exists() && s.version() != null) {
          return new Version(s.version());
        }
      }
      return seen.get(key).stream().findFirst().map(Version::new).orElse(Version.of(1));
    }

    boolean matches(String key, State state, boolean exists, Long value, String version) {
      if (state.exists() != exists) {
        return false;
      }
      if (!exists) {
        return true;
      }
      boolean versionOk =
          state.version() == null
              ? !seen.get(key).contains(version)
              : state.version().equals(version);
      return versionOk && (value == null || state.value() == value);
    }

    void write(String key, Operation op, FaultKind kind, long operand) {
      Version expected = someVersion(key);
      // A state whose version is unknown (a write that answered "unknown") may hold the expected
      // version, unless the key had that version before (versions never come back): the write may
      // then succeed or be refused.
      Predicate<State> succeeds =
          switch (op) {
            case INSERT -> s -> !s.exists();
            case COMPARE_AND_SET, DELETE ->
                s ->
                    s.exists()
                        && (s.version() == null
                            ? !seen.get(key).contains(expected.value())
                            : expected.value().equals(s.version()));
            case UPDATE -> State::exists;
          };
      Predicate<State> mayBeRefused =
          switch (op) {
            case INSERT -> State::exists;
            case COMPARE_AND_SET, DELETE ->
                s -> !s.exists() || s.version() == null || !expected.value().equals(s.version());
            case UPDATE -> s -> !s.exists();
          };
      UnaryOperator<State> after =
          switch (op) {
            case INSERT, COMPARE_AND_SET -> s -> new State(true, operand, null);
            case DELETE -> s -> State.ABSENT;
            case UPDATE -> s -> new State(true, s.value() + operand, null);
          };
      VersionedStore<String, Long> target = kind == null ? plain : faulty;
      AtomicInteger applied = new AtomicInteger();
      Supplier<Either<Conflict, ?>> call =
          switch (op) {
            case INSERT -> () -> target.insert(key, operand);
            case COMPARE_AND_SET -> () -> target.compareAndSet(key, expected, operand);
            case DELETE -> () -> target.delete(key, expected);
            case UPDATE ->
                () ->
                    target.update(
                        key,
                        v -> {
                          applied.incrementAndGet();
                          return v + operand;
                        });
          };
      String how =
          op
              + " of "
              + key
              + (op == Operation.COMPARE_AND_SET || op == Operation.DELETE
                  ? " at version " + expected
                  : "")
              + " ("
              + operand
              + ")"
              + (kind == null ? "" : " under " + kind)
              + ", possible states "
              + possible.get(key);
      InjectedFault fault = kind == null ? null : inject(op, kind);
      Either<Conflict, ?> answer;
      try {
        answer = call.get();
      } catch (BackendUnavailableException unknown) {
        answer = null;
      } finally {
        if (fault != null) {
          census.ran(ActionCensus.fault(op.name(), kind) + (fault.fired() ? "" : " (not fired)"));
        }
      }
      Set<State> before = possible.get(key);
      Set<State> next = new LinkedHashSet<>();
      if (answer == null) {
        next.addAll(before);
        before.stream().filter(succeeds).map(after).forEach(next::add);
      } else if (answer.isRight()) {
        Object result = answer.get();
        List<State> could = before.stream().filter(succeeds).toList();
        if (could.isEmpty()) {
          throw new AssertionError(how + " succeeded, which no possible state allows");
        }
        if (result instanceof dev.nolock.patterns.Versioned<?> written) {
          String version = written.version().value();
          if (seen.get(key).contains(version)) {
            throw new AssertionError(
                how + " wrote version " + version + ", which the key had before");
          }
          long value = (Long) written.value();
          if (could.stream().map(after).noneMatch(s -> s.value() == value)) {
            throw new AssertionError(
                how
                    + " returned value "
                    + value
                    + ", not one the model allows"
                    + (op == Operation.UPDATE ? ": the change was applied more than once" : ""));
          }
          seen.get(key).add(version);
          next.add(new State(true, value, version));
        } else {
          next.add(State.ABSENT);
        }
      } else {
        Conflict conflict = answer.getLeft();
        String current = conflict.current().map(Version::value).getOrNull();
        List<State> refusing = before.stream().filter(mayBeRefused).toList();
        if (refusing.isEmpty()) {
          throw new AssertionError(
              how
                  + " answered "
                  + conflict
                  + " for a write the model says must have succeeded: a false conflict");
        }
        for (State s : refusing) {
          if (matches(key, s, current != null, null, current)) {
            next.add(current == null ? State.ABSENT : new State(true, s.value(), current));
          }
        }
        if (next.isEmpty()) {
          throw new AssertionError(
              how + " answered " + conflict + ", naming a version no possible" + " state has");
        }
        if (current != null) {
          seen.get(key).add(current);
        }
      }
      possible.put(key, next);
    }

    void read(String key) {
      Option<dev.nolock.patterns.Versioned<Long>> stored = plain.read(key);
      boolean exists = stored.isDefined();
      Long value = stored.map(v -> v.value()).getOrNull();
      String version = stored.map(v -> v.version().value()).getOrNull();
      List<State> matching =
          possible.get(key).stream().filter(s -> matches(key, s, exists, value, version)).toList();
      if (matching.isEmpty()) {
        throw new AssertionError(
            "a read of "
                + key
                + " found "
                + stored
                + ", none of the possible states "
                + possible.get(key)
                + " (a write applied twice, a lost one, or a version reused)");
      }
      if (version != null) {
        seen.get(key).add(version);
      }
      Set<State> next = new LinkedHashSet<>();
      next.add(exists ? new State(true, value, version) : State.ABSENT);
      possible.put(key, next);
    }

    @Override
    public String toString() {
      return "Model" + possible;
    }
  }

  /** One write with no fault, a lost answer or a lost request. */
  final class Write implements Action.Independent<Model> {
    private final Operation op;

    Write(Operation op) {
      this.op = op;
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer() {
      Arbitrary<FaultKind> kinds = Arbitraries.of(FaultKind.values()).injectNull(0.3);
      return net.jqwik.api.Combinators.combine(
              Arbitraries.integers().between(0, 1), kinds, Arbitraries.longs().between(1, 9))
          .as(
              (i, kind, operand) ->
                  Transformer.mutate(
                      op + " " + i + (kind == null ? "" : " under " + kind) + " (" + operand + ")",
                      (Model m) -> {
                        census.ran(op.name().toLowerCase(java.util.Locale.ROOT));
                        m.write(m.keys.get(i), op, kind, operand);
                      }));
    }
  }

  /** A plain read, which must match a possible state. */
  final class Read implements Action.Independent<Model> {
    @Override
    public Arbitrary<Transformer<Model>> transformer() {
      return Arbitraries.integers()
          .between(0, 1)
          .map(
              i ->
                  Transformer.mutate(
                      "read " + i,
                      (Model m) -> {
                        census.ran("read");
                        m.read(m.keys.get(i));
                      }));
    }
  }
}
