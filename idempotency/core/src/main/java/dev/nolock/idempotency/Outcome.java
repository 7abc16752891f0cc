package dev.nolock.idempotency;

import dev.nolock.patterns.FencingToken;
import java.time.Duration;
import java.util.Objects;

/**
 * What {@link IdempotencyKeys#execute} did with one request. Each value maps to one answer of the
 * IETF draft "The Idempotency-Key HTTP Header Field" (the HTTP adapter sends exactly these):
 *
 * <ul>
 *   <li>{@link Completed}: this call ran the action (or the rest of its phases) and stored the
 *       result; 2xx or whatever status the result carries.
 *   <li>{@link Replayed}: an earlier call with the same key and fingerprint completed; its stored
 *       result is returned and nothing ran.
 *   <li>{@link RequestInProgress}: another attempt holds the key's lease right now; 409.
 *   <li>{@link KeyReusedWithDifferentRequest}: the key was first used with another fingerprint;
 *       422.
 *   <li>{@link StaleAttempt}: this call ran, but its lease expired meanwhile and a retry took the
 *       key over with a higher attempt token; everything this attempt wrote in the phase that
 *       noticed was rolled back. 409: ask again and you get the replay.
 * </ul>
 *
 * Losing a race is a value, never an exception; a broken database is a {@link
 * dev.nolock.patterns.BackendUnavailableException}. Java 17 has no pattern-matching {@code switch},
 * so test with {@code instanceof}: {@code if (outcome instanceof Outcome.Completed<Receipt> c)}.
 *
 * @param <R> the action's result type
 */
public sealed interface Outcome<R> {

  /** True only for {@link Replayed}: the result comes from storage and nothing ran. */
  default boolean replayed() {
    return false;
  }

  /**
   * This call ran the action and stored its result under the key.
   *
   * @param result what the action returned (or the final result the {@link FailurePolicy} chose)
   * @param attempt the attempt token that stored it
   */
  record Completed<R>(R result, FencingToken attempt) implements Outcome<R> {
    public Completed {
      Objects.requireNonNull(attempt, "attempt");
    }
  }

  /**
   * The key was completed by an earlier request with the same fingerprint; this is its stored
   * result, decoded again. The action did not run.
   */
  record Replayed<R>(R result) implements Outcome<R> {
    @Override
    public boolean replayed() {
      return true;
    }
  }

  /**
   * Another attempt holds the key's lease; nothing ran. Ask again later (HTTP 409).
   *
   * @param retryAfter how long the lease still runs on the database's clock (zero if it was just
   *     ending); a takeover is possible after it, if the holder neither finishes nor releases
   */
  record RequestInProgress<R>(Duration retryAfter) implements Outcome<R> {
    public RequestInProgress {
      Objects.requireNonNull(retryAfter, "retryAfter");
    }
  }

  /**
   * The key was first used with a different request fingerprint; nothing ran and nothing is
   * replayed (HTTP 422). The client reused a key for a new request: it needs a new key.
   */
  record KeyReusedWithDifferentRequest<R>() implements Outcome<R> {}

  /**
   * This attempt's lease ran out while it worked and a retry took the key over with a higher token:
   * the attempt's conditional update of the key matched no row, so the transaction that held its
   * last phase (its local database effects and the result) was rolled back. Nothing this phase
   * wrote is visible. Earlier phases it completed stay, as recovery points.
   *
   * @param attempt the superseded attempt's token
   */
  record StaleAttempt<R>(FencingToken attempt) implements Outcome<R> {
    public StaleAttempt {
      Objects.requireNonNull(attempt, "attempt");
    }
  }
}
