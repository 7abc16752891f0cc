package dev.nolock.idempotency;

import io.vavr.control.Option;
import java.util.Objects;
import java.util.function.Function;

/**
 * Decides, for an exception thrown by an action or a phase, checked or not, whether it is
 * <em>final</em> (its result is stored and replayed to every retry, like Stripe's stored 4xx) or
 * <em>retryable</em> (the key is released for a retry and the exception reaches the caller of
 * {@code execute} unchanged, the same instance).
 *
 * <p>Either way the phase's transaction is rolled back first, so the failed phase leaves no local
 * effects. A final failure is then stored in a transaction of its own, checked against the attempt
 * token like any completion. A retryable one ends the lease at once ({@code locked_until =
 * clock_timestamp()}), keeps the recovery point, and the next request with the same key and
 * fingerprint takes over with a higher attempt token and resumes at the failed phase.
 *
 * <p>Decide by what a retry would do: a declined card, a validation error, "insufficient funds"
 * come back the same on every retry and are final; a timeout, a deadlock, a network error may pass
 * and are retryable. When in doubt, retryable: the caller can always send the request again. Name
 * your own refusal types, never a broad one: {@code IOException} also covers {@code
 * SocketTimeoutException} and {@code HttpTimeoutException}, after which the foreign system may well
 * have acted, and storing "refused" for good would then be a false answer.
 *
 * <p>An {@link InterruptedException} is never given to the policy: an interrupt asks the thread to
 * stop and says nothing about the request, so the key is released, the thread's interrupt flag set
 * again, and the exception rethrown.
 *
 * @param <R> the action's result type
 */
@FunctionalInterface
public interface FailurePolicy<R> {

  /**
   * The final result to store for {@code failure}, or {@link Option#none()} to release the key and
   * rethrow.
   */
  Option<R> finalResult(Exception failure);

  /** Every exception is retryable: release the key and rethrow. The default. */
  static <R> FailurePolicy<R> releaseOnEveryFailure() {
    return failure -> Option.none();
  }

  /**
   * Exceptions of {@code type} (and its subclasses), checked or not, are final, stored as {@code
   * toResult} maps them; every other exception is retryable.
   */
  static <R, E extends Exception> FailurePolicy<R> finalFor(
      Class<E> type, Function<? super E, ? extends R> toResult) {
    Objects.requireNonNull(type, "type");
    Objects.requireNonNull(toResult, "toResult");
    return failure ->
        type.isInstance(failure)
            ? Option.some(Objects.requireNonNull(toResult.apply(type.cast(failure)), "toResult"))
            : Option.none();
  }
}
