package dev.nolock.idempotency;

/**
 * The idempotency key is missing or malformed (the IETF draft's 400). The message says which rule
 * the key broke and never repeats the key itself, so it is safe to send to the client.
 *
 * <p>A key is 1 to {@value IdempotencyKeys#MAX_KEY_LENGTH} characters, each a visible ASCII
 * character ({@code !} to {@code ~}, 0x21-0x7E): no spaces, no control characters, no non-ASCII. A
 * UUID, a ULID or a base64url token all pass.
 */
public final class InvalidIdempotencyKeyException extends IllegalArgumentException {

  private static final long serialVersionUID = 1L;

  public InvalidIdempotencyKeyException(String message) {
    super(message);
  }
}
