package dev.nolock.patterns;

/**
 * Validation of the names that reach a backend: lock, queue and scope names given by callers (SQL
 * identifiers from configuration are validated by {@code SqlNames} in {@code nolock-patterns-sql}).
 * Every nolock module validates at its API edge through these, so that a bad name is refused with a
 * message that says how to fix the call before anything is written.
 */
public final class Names {

  private Names() {}

  /**
   * A caller-given name (a lock, a queue, a scope): not blank, at most {@code maxLength}
   * characters, no control characters, no half of a surrogate pair (which UTF-8 would turn into
   * {@code ?}, making two names one key).
   *
   * @param what what the name names, for the message ("lock name")
   * @return {@code value}, for assignment
   */
  public static String requireName(String what, String value, int maxLength) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " is "
              + (value == null ? "null" : "blank")
              + ": pass a non-empty name"
              + " that identifies what is coordinated, e.g. \"invoice-42\".");
    }
    if (value.length() > maxLength) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " is "
              + value.length()
              + " characters long, more than "
              + maxLength
              + ": shorten it or hash the long part (\""
              + value.substring(0, 20)
              + "...\").");
    }
    for (int i = 0; i < value.length(); i++) {
      char c = value.charAt(i);
      boolean paired =
          Character.isHighSurrogate(c)
              ? i + 1 < value.length() && Character.isLowSurrogate(value.charAt(i + 1))
              : !Character.isLowSurrogate(c)
                  || (i > 0 && Character.isHighSurrogate(value.charAt(i - 1)));
      if (!paired) {
        // UTF-8 encodes a lone surrogate as '?': "a\uD800" and "a?" would share a key.
        throw new IllegalArgumentException(
            "The "
                + what
                + " contains half of a surrogate pair at index "
                + i
                + ": pass well-formed text (a whole character, not a broken UTF-16 string).");
      }
      if (Character.isISOControl(c)) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " contains a control character at index "
                + i
                + ": use printable"
                + " characters only.");
      }
    }
    return value;
  }
}
