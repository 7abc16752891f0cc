package dev.nolock.patterns;

import java.util.List;

/**
 * A table nolock needs exists with a shape it cannot use: a column it reads or writes is missing,
 * or has a type it cannot bind. Thrown by {@code createTableIfMissing()} (which creates what is
 * missing and leaves what exists, so it never alters a table it did not create).
 *
 * <p>The caller's action: <b>migrate the table</b> to the DDL in the message ({@link #ddl()}), or
 * configure another table name. Retrying does not help; nothing was changed.
 */
public class SchemaMismatchException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  private final String table;
  private final String problem;
  private final List<String> ddl;

  /**
   * @param table the table as configured, e.g. {@code "nolock_scheduled_runs"} or {@code
   *     "app.runs"}
   * @param problem what is wrong with the existing table, e.g. {@code "column attempt is missing"}
   * @param ddl the statements that create a table that fits, in order
   * @throws IllegalArgumentException when a value is null or blank, or {@code ddl} is empty
   */
  public SchemaMismatchException(String table, String problem, List<String> ddl) {
    super(message(table, problem, ddl));
    this.table = table;
    this.problem = problem;
    this.ddl = List.copyOf(ddl);
  }

  /** The table as configured. */
  public String table() {
    return table;
  }

  /** What is wrong with the existing table. */
  public String problem() {
    return problem;
  }

  /** The statements that create a table of the shape nolock needs, also in the message. */
  public List<String> ddl() {
    return ddl;
  }

  private static String message(String table, String problem, List<String> ddl) {
    if (table == null || table.isBlank()) {
      throw new IllegalArgumentException(
          "SchemaMismatchException: pass the table name as configured, got "
              + (table == null ? "null" : "a blank name"));
    }
    if (problem == null || problem.isBlank()) {
      throw new IllegalArgumentException(
          "SchemaMismatchException: pass what is wrong with table "
              + table
              + ", e.g. which column is missing");
    }
    if (ddl == null || ddl.isEmpty() || ddl.stream().anyMatch(s -> s == null || s.isBlank())) {
      throw new IllegalArgumentException(
          "SchemaMismatchException: pass the DDL that fits table "
              + table
              + " as one or more non-blank statements, got "
              + ddl);
    }
    return "The table "
        + table
        + " exists but cannot be used: "
        + problem
        + ". Nothing was changed. Migrate it to this shape, or configure another table:\n"
        + String.join(";\n", ddl)
        + ";";
  }
}
