package dev.nolock.patterns.sql.migration;

import static org.jooq.impl.DSL.val;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;

/**
 * Everything the catalog says about the objects of one schema that a module's DDL decides, one
 * sorted line per fact, with the schema's own name replaced by {@code <schema>} so that two schemas
 * made by two paths (a module's {@code createTableIfMissing} and its migrations) compare equal
 * exactly when they have the same shape:
 *
 * <ul>
 *   <li>each table and sequence: its kind, persistence and storage options;
 *   <li>each column: position, type with modifiers ({@code format_type}), {@code NOT NULL}, default
 *       expression ({@code pg_get_expr}), identity and generated kinds, and a collation that is not
 *       its type's;
 *   <li>each constraint: name, kind, definition ({@code pg_get_constraintdef}: checks, primary and
 *       unique keys, foreign keys), deferrability and validation;
 *   <li>each index: its full definition ({@code pg_get_indexdef}: unique, method, columns and
 *       partial-index predicate), and whether it is the primary key and valid;
 *   <li>each sequence: type, start, increment, bounds, cache, cycle, and the column that owns it
 *       (an identity's or a {@code serial}'s);
 *   <li>each trigger that is not internal ({@code pg_get_triggerdef}).
 * </ul>
 *
 * Tables named in {@code ignored} (a migration tool's history table) are left out with their
 * columns, constraints and indexes. The definitions are read with {@code search_path} set to {@code
 * pg_catalog} only, so that every name in them is schema-qualified the same way.
 */
public record SchemaSnapshot(String schema, List<String> lines) {

  /** The catalog of {@code schema}, without the tables in {@code ignored}. */
  public static SchemaSnapshot of(DSLContext dsl, String schema, Set<String> ignored) {
    return dsl.transactionResult(
        configuration -> {
          DSLContext tx = configuration.dsl();
          tx.execute("SET LOCAL search_path TO pg_catalog");
          String[] skip = ignored.toArray(String[]::new);
          TreeSet<String> lines = new TreeSet<>();
          read(tx, RELATIONS, schema, skip, lines);
          read(tx, COLUMNS, schema, skip, lines);
          read(tx, CONSTRAINTS, schema, skip, lines);
          read(tx, INDEXES, schema, skip, lines);
          read(tx, SEQUENCES, schema, skip, lines);
          read(tx, TRIGGERS, schema, skip, lines);
          List<String> normalised = new ArrayList<>();
          Pattern own = Pattern.compile("(?<![A-Za-z0-9_])\"?" + Pattern.quote(schema) + "\"?\\.");
          for (String line : lines) {
            normalised.add(own.matcher(line).replaceAll(Matcher.quoteReplacement("<schema>.")));
          }
          return new SchemaSnapshot(schema, List.copyOf(new TreeSet<>(normalised)));
        });
  }

  /** The lines of {@code this} missing from {@code other}. */
  public List<String> notIn(SchemaSnapshot other) {
    List<String> missing = new ArrayList<>(lines);
    missing.removeAll(other.lines);
    return missing;
  }

  /**
   * Throws an {@link AssertionError} naming every line that only one of the two has, unless {@code
   * actual} has exactly the lines of {@code expected}.
   */
  public static void assertSameShape(SchemaSnapshot expected, SchemaSnapshot actual) {
    List<String> onlyExpected = expected.notIn(actual);
    List<String> onlyActual = actual.notIn(expected);
    if (!onlyExpected.isEmpty() || !onlyActual.isEmpty()) {
      throw new AssertionError(
          "The schemas differ.\n  only in "
              + expected.schema
              + ":\n    "
              + String.join("\n    ", onlyExpected)
              + "\n  only in "
              + actual.schema
              + ":\n    "
              + String.join("\n    ", onlyActual));
    }
    if (expected.lines.isEmpty()) {
      throw new AssertionError("Both schemas are empty: nothing was compared");
    }
  }

  private static void read(
      DSLContext tx, String query, String schema, String[] skip, TreeSet<String> into) {
    tx.resultQuery(query, val(schema), val(skip))
        .fetch()
        .forEach(r -> into.add(r.get(0, String.class)));
  }

  private static final String RELATIONS =
      "SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' persistence=' ||"
          + " c.relpersistence::text || ' options=' || coalesce(array_to_string(c.reloptions, ','),"
          + " '') FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname ="
          + " {0} AND c.relkind NOT IN ('i', 'I', 'c', 't') AND NOT c.relname = ANY ({1}::text[])";

  private static final String COLUMNS =
      "SELECT 'column ' || c.relname || '.' || a.attname"
          + " || ' position=' || row_number() OVER (PARTITION BY c.oid ORDER BY a.attnum)"
          + " || ' type=' || format_type(a.atttypid, a.atttypmod)"
          + " || ' notnull=' || a.attnotnull"
          + " || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')"
          + " || ' identity=' || a.attidentity::text || ' generated=' || a.attgenerated::text"
          + " || ' collation=' || CASE WHEN a.attcollation <> t.typcollation"
          + "   THEN a.attcollation::regcollation::text ELSE '' END"
          + " FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid"
          + " JOIN pg_namespace n ON n.oid = c.relnamespace JOIN pg_type t ON t.oid = a.atttypid"
          + " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
          + " WHERE n.nspname = {0} AND c.relkind IN ('r', 'p', 'v', 'm', 'f')"
          + " AND a.attnum > 0 AND NOT a.attisdropped AND NOT c.relname = ANY ({1}::text[])";

  private static final String CONSTRAINTS =
      "SELECT 'constraint ' || c.relname || '.' || k.conname || ' type=' || k.contype::text"
          + " || ' def=' || pg_get_constraintdef(k.oid)"
          + " || ' deferrable=' || k.condeferrable || ' deferred=' || k.condeferred"
          + " || ' validated=' || k.convalidated"
          + " FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid"
          + " JOIN pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = {0} AND NOT c.relname = ANY ({1}::text[])";

  private static final String INDEXES =
      "SELECT 'index ' || ic.relname || ' on ' || c.relname || ': ' ||"
          + " pg_get_indexdef(i.indexrelid) || ' primary=' || i.indisprimary || ' valid=' ||"
          + " i.indisvalid || ' immediate=' || i.indimmediate FROM pg_index i JOIN pg_class ic ON"
          + " ic.oid = i.indexrelid JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n ON"
          + " n.oid = c.relnamespace WHERE n.nspname = {0} AND NOT c.relname = ANY ({1}::text[])";

  private static final String SEQUENCES =
      "SELECT 'sequence ' || c.relname || ' type=' || format_type(s.seqtypid, NULL)"
          + " || ' start=' || s.seqstart || ' increment=' || s.seqincrement"
          + " || ' min=' || s.seqmin || ' max=' || s.seqmax || ' cache=' || s.seqcache"
          + " || ' cycle=' || s.seqcycle || ' owned_by=' || coalesce((SELECT t.relname || '.'"
          + "   || a.attname || ' (' || d.deptype::text || ')' FROM pg_depend d"
          + "   JOIN pg_class t ON t.oid = d.refobjid JOIN pg_attribute a"
          + "   ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid"
          + "   WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid"
          + "   AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')), '')"
          + " FROM pg_sequence s JOIN pg_class c ON c.oid = s.seqrelid"
          + " JOIN pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = {0} AND NOT c.relname = ANY ({1}::text[])";

  private static final String TRIGGERS =
      "SELECT 'trigger ' || c.relname || '.' || t.tgname || ': ' || pg_get_triggerdef(t.oid)"
          + " FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid"
          + " JOIN pg_namespace n ON n.oid = c.relnamespace"
          + " WHERE n.nspname = {0} AND NOT t.tgisinternal AND NOT c.relname = ANY ({1}::text[])";
}
