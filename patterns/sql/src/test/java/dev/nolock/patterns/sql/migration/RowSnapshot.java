package dev.nolock.patterns.sql.migration;

import static org.jooq.impl.DSL.val;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.jooq.DSLContext;

/**
 * Every row of every table of one schema (but the {@code ignored} ones), each as its {@code
 * to_jsonb} text, sorted per table, with the table's columns; and where each sequence stands
 * ({@code last_value}, {@code is_called}: an identity's, or the idempotency keys' attempt tokens,
 * which must never be handed out twice). What an upgrade must keep.
 */
public record RowSnapshot(String schema, Map<String, Table> tables) {

  /** One table's columns in order, and its rows as sorted JSON texts. */
  public record Table(List<String> columns, List<String> rows) {}

  public static RowSnapshot of(DSLContext dsl, String schema, Set<String> ignored) {
    Map<String, Table> tables = new TreeMap<>();
    for (String table : tables(dsl, schema, ignored)) {
      tables.put(
          table, new Table(columns(dsl, schema, table), rows(dsl, schema, table, List.of())));
    }
    // A sequence is kept as a table without columns whose one row is where it stands.
    for (String sequence : sequences(dsl, schema)) {
      if (!ignored.contains(sequence)) {
        tables.put(sequence, new Table(List.of(), List.of(position(dsl, schema, sequence))));
      }
    }
    return new RowSnapshot(schema, tables);
  }

  /** The number of rows in all tables. */
  public int rowCount() {
    return tables.values().stream()
        .filter(t -> !t.columns().isEmpty())
        .mapToInt(t -> t.rows().size())
        .sum();
  }

  /**
   * Throws an {@link AssertionError} naming each table that is gone, each column that is gone, and
   * each row that is missing or changed, unless every table of this snapshot still holds exactly
   * its rows with their values in the columns it had. Columns added since (a later migration's) are
   * left out of the comparison.
   */
  public void assertKeptIn(DSLContext dsl) {
    List<String> problems = new ArrayList<>();
    List<String> now = tables(dsl, schema, Set.of());
    List<String> sequencesNow = sequences(dsl, schema);
    tables.forEach(
        (table, before) -> {
          if (before.columns().isEmpty()) {
            String position = sequencesNow.contains(table) ? position(dsl, schema, table) : "gone";
            if (!before.rows().contains(position)) {
              problems.add("sequence " + table + " was at " + before.rows() + ", now " + position);
            }
            return;
          }
          if (!now.contains(table)) {
            problems.add("table " + table + " is gone (it had " + before.rows().size() + " rows)");
            return;
          }
          List<String> columns = columns(dsl, schema, table);
          List<String> gone = new ArrayList<>(before.columns());
          gone.removeAll(columns);
          if (!gone.isEmpty()) {
            problems.add("table " + table + " lost its columns " + gone);
            return;
          }
          List<String> added = new ArrayList<>(columns);
          added.removeAll(before.columns());
          List<String> rows = rows(dsl, schema, table, added);
          List<String> missing = new ArrayList<>(before.rows());
          missing.removeAll(rows);
          List<String> unexpected = new ArrayList<>(rows);
          unexpected.removeAll(before.rows());
          if (!missing.isEmpty() || !unexpected.isEmpty()) {
            problems.add(
                "table "
                    + table
                    + " rows changed: before only "
                    + missing
                    + ", after only "
                    + unexpected);
          }
        });
    if (!problems.isEmpty()) {
      throw new AssertionError(
          "The upgrade lost or changed live rows:\n  " + String.join("\n  ", problems));
    }
  }

  private static List<String> tables(DSLContext dsl, String schema, Set<String> ignored) {
    return dsl.resultQuery(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = {0} AND c.relkind IN ('r', 'p')"
                + " AND NOT c.relname = ANY ({1}::text[]) ORDER BY 1",
            val(schema), val(ignored.toArray(String[]::new)))
        .fetch(0, String.class);
  }

  private static List<String> sequences(DSLContext dsl, String schema) {
    return dsl.resultQuery(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = {0} AND c.relkind = 'S' ORDER BY 1",
            val(schema))
        .fetch(0, String.class);
  }

  private static String position(DSLContext dsl, String schema, String sequence) {
    return dsl.resultQuery(
            "SELECT 'last_value=' || last_value || ' is_called=' || is_called FROM "
                + quote(schema)
                + "."
                + quote(sequence))
        .fetchSingle(0, String.class);
  }

  private static List<String> columns(DSLContext dsl, String schema, String table) {
    return dsl.resultQuery(
            "SELECT a.attname::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
                + " JOIN pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = {0} AND c.relname = {1} AND a.attnum > 0"
                + " AND NOT a.attisdropped ORDER BY a.attnum",
            val(schema), val(table))
        .fetch(0, String.class);
  }

  private static List<String> rows(
      DSLContext dsl, String schema, String table, List<String> without) {
    // Names from the catalog, quoted: safe to splice.
    return dsl.resultQuery(
            "SELECT (to_jsonb(t) - {0}::text[])::text FROM "
                + quote(schema)
                + "."
                + quote(table)
                + " t ORDER BY 1",
            val(without.toArray(String[]::new)))
        .fetch(0, String.class);
  }

  private static String quote(String identifier) {
    return "\"" + identifier.replace("\"", "\"\"") + "\"";
  }
}
