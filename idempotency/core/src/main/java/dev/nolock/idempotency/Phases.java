package dev.nolock.idempotency;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * A multi-step operation as atomic phases with recovery points, after Stripe's design: each phase
 * runs in its own transaction together with the update of the key's recovery point to the phase's
 * name, checked against the attempt token. A retry after a crash resumes after the last phase that
 * committed, instead of starting over.
 *
 * <pre>{@code
 * Phases<String, RuntimeException> transfer =
 *     Phases.builder()
 *         .phase("debited", attempt -> debit(attempt.dsl(), ...))       // recovery point "debited"
 *         .phase("sent", attempt -> bank.send(attempt.idempotencyKeyForDownstream(), ...))
 *         .finish(attempt -> receipt(attempt.dsl()));                    // stored and replayed
 * }</pre>
 *
 * Phases that throw a checked exception name it: {@code Phases.builder(IOException.class)} builds a
 * {@code Phases<R, IOException>}, and {@code execute} with it {@code throws IOException}. A phase
 * that throws, checked or not, rolls back its own transaction only: the phases before it stay
 * committed, the key keeps their recovery point, and the {@link FailurePolicy} decides whether a
 * retry resumes there or the failure is stored as the result.
 *
 * <p>A phase that calls a foreign system should do only that call (and record its answer through
 * {@link Attempt#dsl()}): a crash after the call but before the commit repeats the call on retry,
 * which is safe only because the foreign system sees the same idempotency key again. Phases pass
 * data to later phases through the database (rows keyed by the idempotency key), because a later
 * phase may run in another process.
 *
 * <p>Recovery point names are stored: renaming or reordering phases while keys are in progress
 * makes those keys fail with {@link IllegalStateException} on retry. Immutable.
 *
 * @param <R> the result of the final phase
 * @param <X> the checked exception the phases may throw ({@link RuntimeException} when none)
 */
public final class Phases<R, X extends Exception> {

  /** The recovery point of a key on which no phase has completed. */
  public static final String STARTED = "started";

  /** The recovery point of a completed key. */
  public static final String FINISHED = "finished";

  /** Most phases in one operation. */
  public static final int MAX_PHASES = 32;

  private static final Pattern NAME = Pattern.compile("[a-z][a-z0-9_]{0,62}");

  /**
   * One intermediate phase; it commits with its recovery point when it returns.
   *
   * @param <X> the checked exception it may throw ({@link RuntimeException} when none)
   */
  @FunctionalInterface
  public interface Step<X extends Exception> {
    void run(Attempt attempt) throws X;
  }

  private final List<String> names;
  private final List<Step<X>> steps;
  private final IdempotentAction<R, X> last;

  private Phases(List<String> names, List<Step<X>> steps, IdempotentAction<R, X> last) {
    this.names = List.copyOf(names);
    this.steps = List.copyOf(steps);
    this.last = Objects.requireNonNull(last, "the final phase");
  }

  /** One phase: the action and the storing of its result, in one transaction. */
  public static <R, X extends Exception> Phases<R, X> single(IdempotentAction<R, X> action) {
    return new Phases<>(List.of(), List.of(), action);
  }

  /**
   * A builder for phases that throw no checked exception; {@link Builder#finish} fixes the result
   * type.
   */
  public static Builder<RuntimeException> builder() {
    return new Builder<>();
  }

  /**
   * A builder for phases that may throw the checked {@code exception} (e.g. {@code
   * IOException.class}); {@code execute} with the phases built rethrows it.
   */
  public static <X extends Exception> Builder<X> builder(Class<X> exception) {
    if (exception == null) {
      throw new IllegalArgumentException(
          "exception is null: pass the checked exception the phases throw, e.g."
              + " Phases.builder(IOException.class), or call Phases.builder() when they throw"
              + " none.");
    }
    return new Builder<>();
  }

  /** The intermediate phases' names, in order; the final phase has none of its own. */
  public List<String> names() {
    return names;
  }

  /** The intermediate phases, in the order of {@link #names()}. */
  public List<Step<X>> steps() {
    return steps;
  }

  /** The final phase, whose result is stored. */
  public IdempotentAction<R, X> last() {
    return last;
  }

  /**
   * The index of the first phase to run for a key at {@code recoveryPoint}: 0 for {@value
   * #STARTED}, {@code names().size()} for the final phase.
   *
   * @throws IllegalStateException when the recovery point names no phase of this operation
   */
  public int resumeIndex(String recoveryPoint) {
    if (STARTED.equals(recoveryPoint)) {
      return 0;
    }
    int index = names.indexOf(recoveryPoint);
    if (index < 0) {
      throw new IllegalStateException(
          "The key's recovery point \""
              + recoveryPoint
              + "\" is not a phase of this operation "
              + names
              + ": the phases were renamed or reordered while the key was in progress. Keep old"
              + " phase names until such keys have completed or been forgotten"
              + " (IdempotencyKeys.forget): a key past its first phase is never purged.");
    }
    return index + 1;
  }

  @Override
  public String toString() {
    return "Phases" + names + " + final";
  }

  /**
   * Builds {@link Phases}; each call validates at once.
   *
   * @param <X> the checked exception the phases may throw
   */
  public static final class Builder<X extends Exception> {
    private final List<String> names = new ArrayList<>();
    private final List<Step<X>> steps = new ArrayList<>();
    private final Set<String> seen = new HashSet<>();

    private Builder() {}

    /**
     * Adds a phase. Its name is the recovery point stored when it commits: {@code
     * [a-z][a-z0-9_]{0,62}}, unique, not {@value Phases#STARTED} or {@value Phases#FINISHED}.
     */
    public Builder<X> phase(String name, Step<? extends X> step) {
      Objects.requireNonNull(step, "step");
      if (name == null || !NAME.matcher(name).matches()) {
        throw new IllegalArgumentException(
            "A phase name is stored as the key's recovery point and must match"
                + " [a-z][a-z0-9_]{0,62}, got "
                + (name == null ? "null" : "\"" + name + "\"")
                + ": name what is done when it commits, e.g. \"ride_created\".");
      }
      if (name.equals(STARTED) || name.equals(FINISHED)) {
        throw new IllegalArgumentException(
            "\"" + name + "\" is a reserved recovery point; name the phase after what it did.");
      }
      if (!seen.add(name)) {
        throw new IllegalArgumentException(
            "The phase name \"" + name + "\" is used twice; recovery points must be unique.");
      }
      if (names.size() + 1 >= MAX_PHASES) {
        throw new IllegalArgumentException(
            "More than " + MAX_PHASES + " phases: group steps that commit together.");
      }
      names.add(name);
      steps.add(step::run);
      return this;
    }

    /**
     * Adds the final phase, whose result is stored with the key, and builds; its result type is the
     * phases' {@code R}.
     */
    public <R> Phases<R, X> finish(IdempotentAction<R, ? extends X> last) {
      Objects.requireNonNull(last, "last");
      return new Phases<>(names, steps, last::run);
    }
  }
}
