package dev.nolock.idempotency;

/**
 * The work done once per key, returning the result that is stored and replayed. It runs in one
 * transaction together with the update that stores its result; write local effects through {@link
 * Attempt#dsl()}.
 *
 * <p>It may throw a checked exception. Whatever it throws, checked or not, rolls its transaction
 * back, and the {@link FailurePolicy} decides: a final failure is stored as a result and replayed;
 * a retryable one releases the key and reaches the caller of {@code execute} unchanged, the same
 * instance. A {@code DataAccessException} raised by the action's own statements (a constraint it
 * violated) is the action's failure like any other, never reported as a database outage.
 *
 * @param <R> the result type
 * @param <X> the checked exception the action may throw ({@link RuntimeException} when none; a
 *     lambda that throws nothing checked infers it)
 */
@FunctionalInterface
public interface IdempotentAction<R, X extends Exception> {

  R run(Attempt attempt) throws X;
}
