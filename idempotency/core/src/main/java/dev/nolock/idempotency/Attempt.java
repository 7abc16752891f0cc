package dev.nolock.idempotency;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import java.util.Objects;
import org.jooq.DSLContext;

/**
 * The attempt that currently holds a key, as seen by one phase of it.
 *
 * <p>Write the phase's <b>local database effects through {@link #dsl()}</b>: it is the transaction
 * in which the key's row is updated, checked against {@link #token()}, when the phase returns. If a
 * retry has taken the key over meanwhile, that check fails and the effects roll back with it. Do
 * not commit or roll back this transaction yourself.
 *
 * <p>Effects on <b>other systems</b> (a payment provider, a message broker) cannot roll back with
 * it: pass {@link #idempotencyKeyForDownstream()} as that system's own idempotency key, so the
 * retry that repeats the call gets the first call's answer instead of a second charge.
 *
 * @param scope the scope passed to {@code execute}
 * @param caller the caller passed to {@code execute}, who owns the key
 * @param key the idempotency key
 * @param token the attempt token: strictly increasing for the key (and unique across keys); a
 *     {@link FencingToken}, so other resources can fence on it too
 * @param number 1 for the first attempt at the key, 2 after the first takeover or retry, ...
 * @param resumedFrom the recovery point this attempt started from: {@value Phases#STARTED} or the
 *     name of the last phase an earlier attempt completed
 * @param idempotencyKeyForDownstream a key to send to a downstream system's own idempotency
 *     mechanism (e.g. Stripe's {@code Idempotency-Key}, an SQS deduplication id): a random UUID
 *     generated when the key's row was first claimed and stored with it, so every attempt of the
 *     row (each takeover, a retry after a lost answer) repeats the same downstream request, while
 *     two rows never share one: not two callers or scopes with the same key, nor a key used again
 *     after it was purged or forgotten
 * @param dsl jOOQ on this phase's transaction
 * @param deadline when this attempt's lease ends, measured on this process's clock from before the
 *     statement that granted or last extended it; check it before a slow foreign call (a stale
 *     attempt's local writes are refused anyway, a foreign call is not)
 */
public record Attempt(
    String scope,
    Caller caller,
    String key,
    FencingToken token,
    int number,
    String resumedFrom,
    String idempotencyKeyForDownstream,
    DSLContext dsl,
    Deadline deadline) {

  public Attempt {
    Objects.requireNonNull(scope, "scope");
    Objects.requireNonNull(caller, "caller");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(token, "token");
    Objects.requireNonNull(resumedFrom, "resumedFrom");
    Objects.requireNonNull(idempotencyKeyForDownstream, "idempotencyKeyForDownstream");
    Objects.requireNonNull(dsl, "dsl");
    Objects.requireNonNull(deadline, "deadline");
    if (number < 1) {
      throw new IllegalArgumentException("An attempt number starts at 1, got " + number);
    }
  }

  /** Without the key, the caller and the downstream key, which a log line must not carry. */
  @Override
  public String toString() {
    return "Attempt[scope="
        + scope
        + ", token="
        + token.value()
        + ", number="
        + number
        + ", resumedFrom="
        + resumedFrom
        + "]";
  }
}
