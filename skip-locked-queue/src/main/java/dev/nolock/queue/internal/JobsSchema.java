package dev.nolock.queue.internal;

import static org.jooq.impl.DSL.constraint;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.queue.JobState;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.conf.ParamType;

/**
 * Creates the jobs table if it is missing, and refuses an existing one the queue cannot use.
 *
 * <p>Guarantee: {@link #createIfMissing} either leaves a table every statement of {@link JobsTable}
 * and {@link AdminSql} works on, with its indexes, or throws {@link SchemaMismatchException} with
 * the DDL that fits and changes nothing. It never alters a table it did not create: migrating one
 * is the owner's decision.
 *
 * <p>Algorithm, in the caller's transaction:
 *
 * <ol>
 *   <li>{@code pg_advisory_xact_lock(hashtextextended('nolock.queue.schema:' || :table, 0))}, the
 *       whole input bound ({@link AdvisoryLockNamespace#QUEUE_SCHEMA}): processes starting together
 *       take turns, so one creates the table and the others find it. The namespace keeps an
 *       application's own advisory lock on the table's name from holding them up.
 *   <li>{@code CREATE TABLE IF NOT EXISTS}.
 *   <li>Read the table the configured name resolves to ({@code to_regclass}, so the search path
 *       decides as for every statement) from the catalog, and list what keeps the queue from using
 *       it ({@link #problems}). Any: throw, and the transaction rolls back.
 *   <li>{@code CREATE INDEX IF NOT EXISTS} for each index.
 * </ol>
 */
public final class JobsSchema {

  private final JobsTable jobs;
  private final String configured;

  /**
   * @param configured the table as configured ({@code "nolock_jobs"}, {@code "app.jobs"}): a
   *     validated identifier, which {@code to_regclass} resolves as the statements do
   */
  public JobsSchema(JobsTable jobs, String configured) {
    this.jobs = jobs;
    this.configured = configured;
  }

  /**
   * The table and its indexes, or the refusal of an existing table; see the class Javadoc.
   *
   * @throws SchemaMismatchException when the existing table cannot be used
   */
  public void createIfMissing(DSLContext tx) {
    tx.select(
            function(
                unquotedName("pg_advisory_xact_lock"),
                Object.class,
                AdvisoryLockNamespace.QUEUE_SCHEMA.key(configured)))
        .execute();
    List<Query> ddl = jobs.createSchema(tx);
    ddl.get(0).execute();
    List<String> problems = problems(tx);
    if (!problems.isEmpty()) {
      throw new SchemaMismatchException(
          configured,
          String.join("; ", problems),
          ddl.stream().map(q -> q.getSQL(ParamType.INLINED)).toList());
    }
    ddl.subList(1, ddl.size()).forEach(Query::execute);
  }

  /**
   * What keeps the queue's statements from working on the existing table, empty when nothing:
   *
   * <ul>
   *   <li>each column of {@link JobsTable#columns()} exists with a type that holds its values (a
   *       timestamp with its time zone: without one PostgreSQL converts through the session's
   *       zone);
   *   <li>a column a statement sets to NULL is nullable, and any other column the queue does not
   *       write is nullable or has a default (else every enqueue fails);
   *   <li>a unique index on exactly {@code (id)}, without a predicate: every finish and
   *       administrative change matches one job by it;
   *   <li>no CHECK constraint on {@code state} alone names some of the states the queue writes but
   *       not all: a table made before {@code 'cancelled'} existed would refuse every cancel.
   * </ul>
   */
  private List<String> problems(DSLContext tx) {
    Map<String, Column> existing = new LinkedHashMap<>();
    tx.resultQuery(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull,"
                + " a.atthasdef OR a.attidentity <> '' FROM pg_attribute a"
                + " WHERE a.attrelid = to_regclass({0}) AND a.attnum > 0 AND NOT a.attisdropped"
                + " ORDER BY a.attnum",
            val(configured))
        .fetch()
        .forEach(
            r ->
                existing.put(
                    r.get(0, String.class),
                    new Column(
                        r.get(1, String.class), r.get(2, Boolean.class), r.get(3, Boolean.class))));
    List<String> problems = new ArrayList<>();
    jobs.columns()
        .forEach(wanted -> problems.addAll(misfits(wanted, existing.remove(wanted.getName()))));
    existing.forEach(
        (name, other) -> {
          if (other.notNull() && !other.defaulted()) {
            problems.add(
                "column "
                    + name
                    + " is NOT NULL without a default, and the queue does not write it");
          }
        });
    problems.addAll(keyAndStateProblems(tx));
    return problems;
  }

  /** A column of the existing table as the catalog describes it. */
  private record Column(String type, boolean notNull, boolean defaulted) {}

  /** How {@code found} (null when missing) fails to be the column {@code wanted}. */
  private static List<String> misfits(Field<?> wanted, Column found) {
    String column = "column " + wanted.getName();
    if (found == null) {
      return List.of(column + " is missing");
    }
    DataType<?> type = wanted.getDataType();
    List<String> misfits = new ArrayList<>();
    if (!holds(type, found.type())) {
      misfits.add(column + " is " + found.type() + ", not " + expected(type));
    }
    if (type.nullable() && found.notNull()) {
      misfits.add(column + " is NOT NULL, but the queue sets it to NULL");
    }
    return misfits;
  }

  private List<String> keyAndStateProblems(DSLContext tx) {
    List<String> problems = new ArrayList<>();
    Boolean keyed =
        tx.resultQuery(
                "SELECT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass({0})"
                    + " AND i.indisunique AND i.indisvalid AND i.indpred IS NULL"
                    + " AND i.indexprs IS NULL AND i.indnkeyatts = 1"
                    + " AND i.indkey[0] = (SELECT a.attnum FROM pg_attribute a"
                    + " WHERE a.attrelid = i.indrelid AND a.attname = {1}))",
                val(configured), val(jobs.id.getName()))
            .fetchSingle(0, Boolean.class);
    if (!keyed) {
      problems.add("no primary key or unique index on (id)");
    }
    for (Record check :
        tx.resultQuery(
                "SELECT c.conname::text AS name, pg_get_constraintdef(c.oid) AS def"
                    + " FROM pg_constraint c WHERE c.conrelid = to_regclass({0})"
                    + " AND c.contype = 'c' AND c.conkey = ARRAY[(SELECT a.attnum"
                    + " FROM pg_attribute a WHERE a.attrelid = c.conrelid AND a.attname = {1})]",
                val(configured), val(jobs.state.getName()))
            .fetch()) {
      String def = check.get("def", String.class);
      // A constraint that names none of the states (a length limit, say) says nothing about
      // them; one that names some but not all is an enumeration that misses a state.
      List<String> named = new ArrayList<>();
      List<String> missing = new ArrayList<>();
      for (JobState s : JobState.values()) {
        (def.contains("'" + s.sqlValue() + "'") ? named : missing).add("'" + s.sqlValue() + "'");
      }
      if (!named.isEmpty() && !missing.isEmpty()) {
        problems.add(stateCheckProblem(tx, check.get("name", String.class), def, missing));
      }
    }
    return problems;
  }

  private String stateCheckProblem(DSLContext tx, String name, String def, List<String> missing) {
    return "the CHECK constraint "
        + name
        + " on state does not admit "
        + String.join(", ", missing)
        + ", which the queue writes ("
        + def
        + "). Replace it: "
        + tx.alterTable(jobs.table()).dropConstraint(name(name)).getSQL(ParamType.INLINED)
        + "; "
        + tx.alterTable(jobs.table())
            .add(constraint(name(name)).check(jobs.stateCheck()))
            .getSQL(ParamType.INLINED);
  }

  /** True when a column of PostgreSQL type {@code actual} holds every value of {@code wanted}. */
  private static boolean holds(DataType<?> wanted, String actual) {
    Class<?> type = wanted.getType();
    if (type == String.class) {
      if (actual.equals("text") || actual.equals("character varying")) {
        return true;
      }
      return actual.startsWith("character varying(")
          && Integer.parseInt(actual.substring(18, actual.length() - 1)) >= length(wanted);
    }
    if (type == OffsetDateTime.class) {
      return actual.equals("timestamp with time zone")
          || actual.equals("timestamp(6) with time zone");
    }
    return actual.equals(expected(wanted));
  }

  /** The PostgreSQL type a column of {@code wanted} is created with, for messages. */
  private static String expected(DataType<?> wanted) {
    Class<?> type = wanted.getType();
    if (type == String.class) {
      return "text or character varying(" + length(wanted) + ") or wider";
    }
    if (type == OffsetDateTime.class) {
      return "timestamp with time zone";
    }
    if (type == byte[].class) {
      return "bytea";
    }
    return type == Long.class ? "bigint" : "integer";
  }

  /** The width a text column needs: its declared one, or the longest error kept. */
  private static int length(DataType<?> wanted) {
    return wanted.hasLength() && wanted.length() > 0 ? wanted.length() : JobsTable.MAX_ERROR_LENGTH;
  }
}
