package dev.nolock.patterns.sql;

import java.util.Arrays;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.jooq.Name;
import org.jooq.impl.DSL;

/**
 * Validation of SQL identifiers given by configuration (table and schema names). Every PostgreSQL
 * module validates its table names through this before it renders any statement, so that
 * configuration cannot smuggle SQL in and PostgreSQL cannot fold or truncate a name.
 */
public final class SqlNames {

  /**
   * PostgreSQL truncates identifiers at 63 bytes; refusing longer ones avoids silent collisions.
   */
  public static final int MAX_SQL_IDENTIFIER_LENGTH = 63;

  private static final Pattern SQL_IDENTIFIER = Pattern.compile("[a-z_][a-z0-9_]*");

  private SqlNames() {}

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

  /**
   * {@code name} as {@code to_regclass(text)} reads it, resolved on the search path as the
   * statements are: each part (validated by {@link #requireSqlIdentifier}) double-quoted, so that a
   * keyword stays a name.
   */
  public static String regclass(Name name) {
    return Arrays.stream(name.getName())
        .map(part -> '"' + part + '"')
        .collect(Collectors.joining("."));
  }
}
