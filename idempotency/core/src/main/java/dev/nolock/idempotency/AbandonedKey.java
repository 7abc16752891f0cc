package dev.nolock.idempotency;

import java.time.Instant;
import java.util.Objects;

/**
 * A key whose client never came back after some of its phases committed: it is in progress, past
 * {@value Phases#STARTED}, no attempt holds its lease, and its retention has run out since its last
 * activity. {@link IdempotencyKeys#purgeExpired()} keeps such a key, because a later request with
 * it must resume after the committed phases instead of running them again; an operator reconciles
 * it and may then {@linkplain IdempotencyKeys#forget forget} it.
 *
 * <p>Its {@code toString()} shows neither the key nor the caller (like {@link Attempt}'s): it ends
 * up in logs, and an anonymous caller's key is a bearer secret for its stored result.
 *
 * @param scope the key's scope
 * @param caller who owns the key
 * @param key the idempotency key
 * @param recoveryPoint the last phase that committed
 * @param attempts how many attempts held the key (1 + takeovers)
 * @param createdAt when the key was first claimed, on the database's clock
 * @param retentionEndedAt when its retention ran out (its last activity plus the retention), on the
 *     database's clock
 */
public record AbandonedKey(
    String scope,
    Caller caller,
    String key,
    String recoveryPoint,
    int attempts,
    Instant createdAt,
    Instant retentionEndedAt) {

  public AbandonedKey {
    Objects.requireNonNull(scope, "scope");
    Objects.requireNonNull(caller, "caller");
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(recoveryPoint, "recoveryPoint");
    Objects.requireNonNull(createdAt, "createdAt");
    Objects.requireNonNull(retentionEndedAt, "retentionEndedAt");
  }

  @Override
  public String toString() {
    return "AbandonedKey[scope="
        + scope
        + ", recoveryPoint="
        + recoveryPoint
        + ", attempts="
        + attempts
        + ", createdAt="
        + createdAt
        + ", retentionEndedAt="
        + retentionEndedAt
        + "]";
  }
}
