package dev.nolock.idempotency;

/**
 * The work done once per key, returning the result that is stored and replayed. It runs in one
 * transaction together with the update that stores its result; write local effects through {@link
 * Attempt#dsl()}. Throw an unchecked exception to fail; the {@link FailurePolicy} decides whether
 * the failure is final or releases the key.
 *
 * @param <R> the result type
 */
@FunctionalInterface
public interface IdempotentAction<R> {

  R run(Attempt attempt);
}
