package dev.nolock.idempotency;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;

/**
 * What identifies the request a key was first used for, so that the same key sent with a different
 * request is refused ({@link Outcome.KeyReusedWithDifferentRequest}) instead of being answered with
 * another request's result.
 *
 * <p>Build it from everything that makes the request what it is: the operation, the target and the
 * payload (the HTTP adapter uses method, path with query, body and, if configured, the
 * authenticated principal). Leave out what may differ between honest retries: timestamps, trace
 * ids, auth tokens that rotate.
 *
 * @param value 1 to {@value #MAX_LENGTH} printable ASCII characters (spaces allowed); {@link
 *     #sha256} gives 64 hex digits
 */
public record Fingerprint(String value) {

  public static final int MAX_LENGTH = 255;

  public Fingerprint {
    if (value == null || value.isEmpty() || value.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(
          "A fingerprint must be 1 to "
              + MAX_LENGTH
              + " characters, got "
              + (value == null ? "null" : value.length() + " characters")
              + ": hash the request with Fingerprint.sha256(...).");
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c < 0x20 || c > 0x7e) {
        throw new IllegalArgumentException(
            "A fingerprint must be printable ASCII (spaces allowed); the character at index "
                + i
                + " is not. Hash the request with Fingerprint.sha256(...).");
      }
    }
  }

  /** A fingerprint with this exact value. */
  public static Fingerprint of(String value) {
    return new Fingerprint(value);
  }

  /**
   * The SHA-256 of the parts, each framed by its length so that {@code ("ab", "c")} and {@code
   * ("a", "bc")} differ; 64 lower-case hex digits.
   */
  public static Fingerprint sha256(byte[]... parts) {
    MessageDigest digest = sha256();
    ByteBuffer length = ByteBuffer.allocate(Integer.BYTES);
    for (byte[] part : parts) {
      if (part == null) {
        throw new IllegalArgumentException("A fingerprint part is null: pass new byte[0]");
      }
      length.clear();
      digest.update(length.putInt(part.length).array());
      digest.update(part);
    }
    return new Fingerprint(HexFormat.of().formatHex(digest.digest()));
  }

  /** {@link #sha256(byte[]...)} of the parts' UTF-8 bytes. */
  public static Fingerprint sha256(String... parts) {
    byte[][] bytes = new byte[parts.length][];
    for (int i = 0; i < parts.length; i++) {
      if (parts[i] == null) {
        throw new IllegalArgumentException("A fingerprint part is null: pass \"\"");
      }
      bytes[i] = parts[i].getBytes(StandardCharsets.UTF_8);
    }
    return sha256(bytes);
  }

  private static MessageDigest sha256() {
    try {
      return MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("Every Java runtime has SHA-256", e);
    }
  }
}
