package dev.nolock.idempotency;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * A result as it is stored with a completed key: a status number and body bytes. A {@link
 * ResultCodec} turns the action's result into this and back.
 *
 * <p>{@code status} is the application's: an HTTP status for the HTTP adapter, any number for other
 * callers (the built-in codecs store 0). The body is copied in and out, so the value is immutable.
 */
public final class StoredResult {

  /** Largest body accepted: a stored result is a response, not a blob store. */
  public static final int MAX_BODY_BYTES = 16 * 1024 * 1024;

  private final int status;
  private final byte[] body;

  private StoredResult(int status, byte[] body) {
    if (body.length > MAX_BODY_BYTES) {
      throw new IllegalArgumentException(
          "A stored result body of "
              + body.length
              + " bytes is over "
              + MAX_BODY_BYTES
              + ": store a reference (an id, a URL) to the large object instead.");
    }
    this.status = status;
    this.body = body.clone();
  }

  /** A result with {@code status} and a copy of {@code body}. */
  public static StoredResult of(int status, byte[] body) {
    if (body == null) {
      throw new IllegalArgumentException("The body is null: pass new byte[0] for an empty body.");
    }
    return new StoredResult(status, body);
  }

  public int status() {
    return status;
  }

  /** A copy of the body. */
  public byte[] body() {
    return body.clone();
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof StoredResult that
        && status == that.status
        && Arrays.equals(body, that.body);
  }

  @Override
  public int hashCode() {
    return 31 * status + Arrays.hashCode(body);
  }

  @Override
  public String toString() {
    String head = HexFormat.of().formatHex(body, 0, Math.min(body.length, 16));
    return "StoredResult[status="
        + status
        + ", body="
        + body.length
        + " bytes "
        + head
        + (body.length > 16 ? "..." : "")
        + "]";
  }
}
