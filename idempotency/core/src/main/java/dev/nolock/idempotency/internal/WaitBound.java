package dev.nolock.idempotency.internal;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import io.vavr.control.Either;
import java.util.concurrent.Semaphore;
import java.util.function.Supplier;

/**
 * Bounds how many calls of one executor wait at once for a key in progress. A waiting call holds
 * its thread for as long as the wait policy allows; without a bound, duplicates of one slow request
 * (a client retrying in a loop, or someone repeating a key on purpose) could hold every request
 * thread of the application.
 *
 * <ol>
 *   <li>The first claim runs without a permit: a call that finds its key free or completed never
 *       waits, so it needs none.
 *   <li>A call that finds its key in progress, under a policy that would retry, takes a permit
 *       without blocking.
 *   <li>No permit left: the call does not wait. It returns that first answer ({@code
 *       RequestInProgress}) at once, as it would without waiting, and the refusal is counted.
 *   <li>With a permit, it retries under the policy as before and gives the permit back however the
 *       wait ends: an answer, the policy giving up, an interrupt, an exception.
 * </ol>
 *
 * Thread-safe; one per executor, so the bound is per {@code IdempotencyKeys} instance.
 */
final class WaitBound {

  private final Semaphore permits;

  WaitBound(int maxWaiting) {
    this.permits = new Semaphore(maxWaiting);
  }

  /** {@code policy}, bounded by this; {@code onRefused} runs when a call finds no permit. */
  Bounded bounding(RetryPolicy policy, Runnable onRefused) {
    return new Bounded(policy, onRefused);
  }

  /** A wait policy whose waits take a permit of the {@link WaitBound}. */
  final class Bounded {
    private final RetryPolicy policy;
    private final Runnable onRefused;

    private Bounded(RetryPolicy policy, Runnable onRefused) {
      this.policy = policy;
      this.onRefused = onRefused;
    }

    /**
     * {@link RetryPolicy#run}, with the steps above: a left value is a key in progress, a right
     * value ends the wait.
     */
    <L, T> Either<L, T> run(LeaseClock clock, Supplier<Either<L, T>> attempt) {
      if (policy.maxAttempts() == 1) {
        return policy.run(clock, attempt); // never waits, so it needs no permit
      }
      boolean[] held = new boolean[1]; // the attempts run on this thread, inside policy.run
      try {
        // A refused call must stop the policy at once: its answer travels as a right value.
        Either<L, Either<L, T>> waited =
            policy.run(
                clock,
                () -> {
                  Either<L, T> result = attempt.get();
                  if (result.isRight()) {
                    return Either.right(result);
                  }
                  if (!held[0]) {
                    if (!permits.tryAcquire()) {
                      onRefused.run();
                      return Either.right(result);
                    }
                    held[0] = true;
                  }
                  return Either.left(result.getLeft());
                });
        return waited.isLeft() ? Either.left(waited.getLeft()) : waited.get();
      } finally {
        if (held[0]) {
          permits.release();
        }
      }
    }
  }
}
