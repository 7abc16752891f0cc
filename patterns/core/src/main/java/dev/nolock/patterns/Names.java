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
   * characters, no control characters.
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
      if (Character.isISOControl(value.charAt(i))) {
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
