package dev.nolock.patterns;

/**
 * The caller's name for one intended fenced write, repeated on every retry of that write, so that a
 * {@code dev.nolock.patterns.sql.Fence} can tell a retry whose earlier attempt committed from a new
 * write: see {@code Fence.write}.
 *
 * <p>Choose it once, before the first attempt (a UUID, or a business key such as {@code
 * "credit-order-42"}), and pass the same id to every retry of that write, under the same lease or a
 * new one; a different write of the same lock needs a different id, for as long as the fence keeps
 * ids ({@code Fence.forgetWritesOlderThan}). At most {@value #MAX_LENGTH} characters, not blank.
 *
 * @param value the id, compared exactly (case-sensitive)
 */
public record WriteId(String value) {

  /** Longest write id the fence stores. */
  public static final int MAX_LENGTH = 255;

  public WriteId {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(
          "The write id is "
              + (value == null ? "null" : "blank")
              + ": choose one id per intended write before its first attempt (a UUID, or a"
              + " business key such as \"credit-order-42\") and pass the same id to its retries;"
              + " or call Fence.write without a write id if the writes are idempotent.");
    }
    if (value.length() > MAX_LENGTH) {
      throw new IllegalArgumentException(
          "The write id is "
              + value.length()
              + " characters long, more than "
              + MAX_LENGTH
              + ": use a shorter id, such as a UUID or a hash of the long part (\""
              + value.substring(0, 20)
              + "...\").");
    }
  }

  /** The write id {@code value}; see the class comment for what to choose. */
  public static WriteId of(String value) {
    return new WriteId(value);
  }
}
