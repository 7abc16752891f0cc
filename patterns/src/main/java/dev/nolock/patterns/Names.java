package dev.nolock.patterns;

import java.util.regex.Pattern;
import org.jooq.Name;
import org.jooq.impl.DSL;

/**
 * Validation of the names that reach a backend: lock, queue and scope names given by callers, and
 * SQL identifiers given by configuration. Every nolock module validates at its API edge through
 * these, so that a bad name is refused with a message that says how to fix the call before anything
 * is written.
 */
public final class Names {

  /**
   * PostgreSQL truncates identifiers at 63 bytes; refusing longer ones avoids silent collisions.
   */
  public static final int MAX_SQL_IDENTIFIER_LENGTH = 63;

  private static final Pattern SQL_IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]*");

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

  /**
   * An SQL identifier from configuration, optionally schema-qualified ({@code "app.fences"}): each
   * part lower-case letters, digits and underscores, starting with a letter or underscore, at most
   * {@value #MAX_SQL_IDENTIFIER_LENGTH} characters. The result is a jOOQ {@link Name}, which jOOQ
   * quotes when it renders; validation keeps configuration from smuggling SQL in and keeps
   * PostgreSQL from folding or truncating the name.
   *
   * @param what what the identifier names, for the message ("fence table")
   */
  public static Name requireSqlIdentifier(String what, String value) {
    if (value == null || value.isBlank()) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " is "
              + (value == null ? "null" : "blank")
              + ": pass a table or column"
              + " name such as \"nolock_fences\" or \"app.nolock_fences\".");
    }
    String[] parts = value.split("\\.", -1);
    if (parts.length > 2) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " \""
              + value
              + "\" has more than two parts: use \"table\" or"
              + " \"schema.table\".");
    }
    for (String part : parts) {
      if (part.length() > MAX_SQL_IDENTIFIER_LENGTH || !SQL_IDENTIFIER.matcher(part).matches()) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " \""
                + value
                + "\" is not a plain SQL identifier: each part must match"
                + " [a-z_][a-z0-9_]* and be at most "
                + MAX_SQL_IDENTIFIER_LENGTH
                + " characters"
                + " (lower case, so PostgreSQL does not fold it).");
      }
    }
    return DSL.name(parts);
  }
}
