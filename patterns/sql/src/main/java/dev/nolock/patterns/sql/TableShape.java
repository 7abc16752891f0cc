package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.SchemaMismatchException;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.jooq.DSLContext;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Record;

/**
 * The shape a module's statements need from an existing table, checked in the catalog: what {@code
 * CREATE TABLE IF NOT EXISTS} cannot see when it leaves a table made by hand, by an older version
 * or by someone else in place.
 *
 * <p>Guarantee: {@link #problems} is empty only when, on the relation the table name resolves to
 * (the search path decides, as for every statement):
 *
 * <ul>
 *   <li>every declared column exists with a type that holds each value the module binds: {@code
 *       bigint} for a {@code Long}; {@code integer} or {@code bigint} for an {@code Integer};
 *       {@code bytea} for a {@code byte[]}; {@code uuid} for a {@code UUID}; {@code text}, an
 *       unbounded {@code varchar} or a {@code varchar} at least as wide as the declared length for
 *       a {@code String}; and {@code timestamp with time zone} for an {@code OffsetDateTime}. A
 *       {@code timestamp} without time zone is refused: PostgreSQL converts {@code
 *       clock_timestamp()} into it and back through each session's TimeZone (pgjdbc sets it from
 *       the JVM's default zone), so two instances in different zones read one lease hours apart;
 *   <li>a column declared nullable ({@code DataType.nullable(true)}) is nullable: the module writes
 *       {@code NULL} to it or leaves it out of an insert;
 *   <li>every other column is nullable or has a default (or is an identity): the module's inserts
 *       do not name it;
 *   <li>if a unique key is declared: a valid, immediate unique index (a primary key or a unique
 *       constraint) whose key columns are exactly those, without a predicate or an expression. It
 *       is what {@code ON CONFLICT (...)} needs and what lets one row per key through;
 *   <li>if a unique key is declared: no unique index or constraint (partial, deferrable or not yet
 *       valid ones included) on a strict subset of its columns, such as a primary key left from an
 *       older, narrower key: it would refuse rows the key keeps apart with a unique violation that
 *       the key's {@code ON CONFLICT} does not catch. Each is named with the statement that drops
 *       it.
 * </ul>
 *
 * <p>Algorithm of {@link #problems}, three catalog reads, each bounded by the query timeout:
 *
 * <ol>
 *   <li>{@code SELECT attname, format_type(atttypid, atttypmod), attnotnull, atthasdef OR
 *       attidentity <> '' FROM pg_attribute WHERE attrelid = to_regclass(:table) AND attnum > 0 AND
 *       NOT attisdropped}, the name quoted part by part so that {@code to_regclass} resolves it as
 *       the statements do.
 *   <li>Compare each declared column with its row, in declaration order; then the undeclared
 *       columns.
 *   <li>{@code SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass(:table) AND
 *       i.indisunique AND i.indimmediate AND i.indisvalid AND i.indpred IS NULL AND i.indexprs IS
 *       NULL AND i.indnkeyatts = :n AND} the sorted names of its key columns (the first {@code
 *       indnkeyatts} of {@code indkey}; the others are {@code INCLUDE} columns) {@code = :names)}.
 *   <li>The unique indexes without expressions on the table whose key column names are contained in
 *       the key's ({@code <@}) but do not contain them all, each with its constraint, if any
 *       ({@code pg_constraint.conindid}).
 * </ol>
 *
 * Immutable: each {@code column} or {@code uniqueKey} returns a new shape.
 */
public final class TableShape {

  private final Name table;
  private final List<Field<?>> columns;
  private final List<String> uniqueKey;

  private TableShape(Name table, List<Field<?>> columns, List<String> uniqueKey) {
    this.table = table;
    this.columns = List.copyOf(columns);
    this.uniqueKey = List.copyOf(uniqueKey);
  }

  /**
   * The shape of {@code table}, without columns yet.
   *
   * @param table a name validated by {@link SqlNames#requireSqlIdentifier}, optionally qualified
   */
  public static TableShape of(Name table) {
    if (table == null || table.getName().length == 0) {
      throw new IllegalArgumentException(
          "TableShape.of(null): pass the table's name from SqlNames.requireSqlIdentifier");
    }
    return new TableShape(table, List.of(), List.of());
  }

  /**
   * This shape with {@code column}: its name, its Java type (which decides the types that fit, see
   * the class Javadoc), its length for a {@code String}, and its nullability.
   *
   * @throws IllegalArgumentException for a Java type this check does not know, or a column twice
   */
  public TableShape column(Field<?> column) {
    if (column == null) {
      throw new IllegalArgumentException("TableShape.column(null): pass a jOOQ field");
    }
    expectedType(column.getDataType()); // refuses an unknown type now, not at the check
    if (columns.stream().anyMatch(c -> c.getName().equals(column.getName()))) {
      throw new IllegalArgumentException(
          "TableShape.column: column " + column.getName() + " is declared twice");
    }
    List<Field<?>> more = new ArrayList<>(columns);
    more.add(column);
    return new TableShape(table, more, uniqueKey);
  }

  /** This shape with each of {@code more}, in order; see {@link #column}. */
  public TableShape columns(List<? extends Field<?>> more) {
    TableShape shape = this;
    for (Field<?> column : more) {
      shape = shape.column(column);
    }
    return shape;
  }

  /**
   * This shape requiring a unique key on exactly {@code key}, declared columns of this shape.
   *
   * @throws IllegalArgumentException when {@code key} is empty or names an undeclared column
   */
  public TableShape uniqueKey(Field<?>... key) {
    if (key == null || key.length == 0) {
      throw new IllegalArgumentException("TableShape.uniqueKey: pass the key's columns");
    }
    List<String> names = new ArrayList<>();
    for (Field<?> column : key) {
      if (column == null || columns.stream().noneMatch(c -> c.getName().equals(column.getName()))) {
        throw new IllegalArgumentException(
            "TableShape.uniqueKey: declare column "
                + (column == null ? "null" : column.getName())
                + " with column() first");
      }
      names.add(column.getName());
    }
    return new TableShape(table, columns, names);
  }

  /**
   * What keeps the module's statements from working on the existing table, in the order of the
   * class Javadoc's rules; empty when nothing. A missing relation lacks every column.
   *
   * @param queryTimeout the JDBC timeout of each catalog read, rounded up to whole seconds
   */
  public List<String> problems(DSLContext dsl, Duration queryTimeout) {
    int timeout = seconds(queryTimeout);
    String regclass = SqlNames.regclass(table);
    Map<String, Record> existing = new LinkedHashMap<>();
    for (Record r :
        dsl.resultQuery(
                "SELECT a.attname::text AS name, format_type(a.atttypid, a.atttypmod) AS type,"
                    + " a.attnotnull AS not_null, (a.atthasdef OR a.attidentity <> '') AS defaulted"
                    + " FROM pg_attribute a WHERE a.attrelid = to_regclass({0})"
                    + " AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
                val(regclass))
            .queryTimeout(timeout)
            .fetch()) {
      existing.put(r.get("name", String.class), r);
    }
    List<String> problems = new ArrayList<>();
    for (Field<?> column : columns) {
      Record found = existing.remove(column.getName());
      if (found == null) {
        problems.add("column " + column.getName() + " is missing");
        continue;
      }
      String type = found.get("type", String.class);
      if (!typeFits(column.getDataType(), type)) {
        problems.add(
            "column "
                + column.getName()
                + " is "
                + type
                + ", not "
                + expectedType(column.getDataType()));
      }
      if (column.getDataType().nullable() && Boolean.TRUE.equals(found.get("not_null"))) {
        problems.add(
            "column " + column.getName() + " is NOT NULL, but nolock leaves it NULL or sets it so");
      }
    }
    existing.forEach(
        (name, r) -> {
          if (Boolean.TRUE.equals(r.get("not_null")) && !Boolean.TRUE.equals(r.get("defaulted"))) {
            problems.add(
                "column " + name + " is NOT NULL without a default, and nolock does not write it");
          }
        });
    if (!uniqueKey.isEmpty()) {
      if (!keyed(dsl, regclass, timeout)) {
        problems.add("no unique key on (" + String.join(", ", uniqueKey) + ")");
      }
      problems.addAll(stricterKeys(dsl, regclass, timeout));
    }
    return problems;
  }

  /**
   * Throws unless {@link #problems} is empty.
   *
   * @param configured the table as configured, for the exception
   * @param ddl the statements that create a table of this shape, for the exception
   * @throws SchemaMismatchException naming every problem, joined by {@code "; "}, and {@code ddl}
   */
  public void require(DSLContext dsl, Duration queryTimeout, String configured, List<String> ddl) {
    List<String> problems = problems(dsl, queryTimeout);
    if (!problems.isEmpty()) {
      throw new SchemaMismatchException(configured, String.join("; ", problems), ddl);
    }
  }

  private boolean keyed(DSLContext dsl, String regclass, int timeout) {
    String[] sorted = uniqueKey.stream().sorted().toArray(String[]::new);
    Boolean found =
        dsl.resultQuery(
                "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass({0})"
                    + " AND i.indisunique AND i.indimmediate AND i.indisvalid"
                    + " AND i.indpred IS NULL AND i.indexprs IS NULL AND i.indnkeyatts = {1}"
                    // The first indnkeyatts entries of indkey are the key; the rest, INCLUDE.
                    + " AND (SELECT array_agg(a.attname::text ORDER BY a.attname::text)"
                    + " FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, n)"
                    + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
                    + " WHERE k.n <= i.indnkeyatts) = {2}::text[])",
                val(regclass), val(sorted.length), val(sorted))
            .queryTimeout(timeout)
            .fetchOne(0, Boolean.class);
    return Boolean.TRUE.equals(found);
  }

  /**
   * The unique indexes whose key columns are a strict subset of the key, each with the statement
   * that drops it: such an index refuses rows the key keeps apart, with a unique violation that the
   * key's {@code ON CONFLICT} does not catch. Partial, deferrable and not yet valid ones count too
   * (PostgreSQL checks uniqueness against each of them); an index with expressions is left out, as
   * its columns cannot be compared by name.
   */
  private List<String> stricterKeys(DSLContext dsl, String regclass, int timeout) {
    List<String> found = new ArrayList<>();
    for (Record r :
        dsl.resultQuery(
                "SELECT i.indexrelid::regclass::text AS index, quote_ident(c.conname) AS con,"
                    + " i.indrelid::regclass::text AS tbl, k.names FROM pg_index i"
                    + " CROSS JOIN LATERAL (SELECT array_agg(a.attname::text ORDER BY k.n) AS names"
                    + " FROM unnest(i.indkey::int2[]) WITH ORDINALITY AS k (attnum, n)"
                    + " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
                    + " WHERE k.n <= i.indnkeyatts) AS k"
                    + " LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid"
                    + " AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u')"
                    + " WHERE i.indrelid = to_regclass({0}) AND i.indisunique"
                    + " AND i.indexprs IS NULL AND k.names <@ {1}::text[]"
                    + " AND NOT k.names @> {1}::text[] ORDER BY 1",
                val(regclass), val(uniqueKey.toArray(String[]::new)))
            .queryTimeout(timeout)
            .fetch()) {
      String constraint = r.get("con", String.class);
      found.add(
          (constraint == null ? "unique index " : "unique constraint ")
              + (constraint == null ? r.get("index", String.class) : constraint)
              + " on ("
              + String.join(", ", r.get("names", String[].class))
              + ") is on fewer columns than the key ("
              + String.join(", ", uniqueKey)
              + "), so it refuses rows the key keeps apart; drop it: "
              + (constraint == null
                  ? "DROP INDEX " + r.get("index", String.class)
                  : "ALTER TABLE "
                      + r.get("tbl", String.class)
                      + " DROP CONSTRAINT "
                      + constraint));
    }
    return found;
  }

  /** True when a column of PostgreSQL type {@code actual} holds every value of {@code wanted}. */
  private static boolean typeFits(DataType<?> wanted, String actual) {
    Class<?> type = wanted.getType();
    if (type == String.class) {
      if (actual.equals("text") || actual.equals("character varying")) {
        return true;
      }
      if (!hasLength(wanted) || !actual.startsWith("character varying(") || !actual.endsWith(")")) {
        return false;
      }
      int width = Integer.parseInt(actual.substring(18, actual.length() - 1));
      return width >= wanted.length();
    }
    if (type == OffsetDateTime.class) {
      return actual.equals("timestamp with time zone")
          || actual.equals("timestamp(6) with time zone");
    }
    if (type == Integer.class) {
      return actual.equals("integer") || actual.equals("bigint");
    }
    if (type == Long.class) {
      return actual.equals("bigint");
    }
    if (type == UUID.class) {
      return actual.equals("uuid");
    }
    return actual.equals("bytea"); // byte[], the one type left (expectedType refused others)
  }

  private static String expectedType(DataType<?> wanted) {
    Class<?> type = wanted.getType();
    if (type == String.class) {
      return hasLength(wanted)
          ? "text or character varying(" + wanted.length() + ") or wider"
          : "text";
    }
    if (type == OffsetDateTime.class) {
      return "timestamp with time zone";
    }
    if (type == Integer.class) {
      return "integer or bigint";
    }
    if (type == Long.class) {
      return "bigint";
    }
    if (type == byte[].class) {
      return "bytea";
    }
    if (type == UUID.class) {
      return "uuid";
    }
    throw new IllegalArgumentException(
        "TableShape.column: no rule for Java type "
            + type.getName()
            + "; declare String, Integer, Long, OffsetDateTime, UUID or byte[]");
  }

  private static boolean hasLength(DataType<?> type) {
    return type.hasLength() && type.length() > 0;
  }

  private static int seconds(Duration timeout) {
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException(
          "TableShape: pass a positive query timeout, e.g. Duration.ofSeconds(5); got " + timeout);
    }
    long seconds = timeout.toSeconds() + (timeout.toNanosPart() > 0 ? 1 : 0);
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, seconds));
  }

  @Override
  public String toString() {
    return "TableShape["
        + SqlNames.regclass(table)
        + ", columns "
        + columns.stream().map(Field::getName).toList()
        + (uniqueKey.isEmpty() ? "" : ", unique key " + uniqueKey)
        + "]";
  }
}
