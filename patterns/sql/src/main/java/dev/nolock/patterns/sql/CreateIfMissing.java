package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.val;

import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.ResultQuery;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConnectionProvider;

/**
 * Runs a module's {@code CREATE ... IF NOT EXISTS} so that processes starting at once may all run
 * it: the one that loses the race to create the same table, sequence or index finds the winner's
 * and carries on, instead of failing.
 *
 * <p>Why it is needed: PostgreSQL's {@code IF NOT EXISTS} looks the name up before it inserts the
 * catalog rows, and does not lock the name. Two creators that both find it missing both insert; the
 * second waits for the first to commit and then fails with SQLState {@code 23505} (a duplicate in
 * {@code pg_type} or {@code pg_class}), {@code 42P07} (duplicate table) or {@code 42710} (duplicate
 * object). {@link SqlErrors} classifies these, rightly for any other statement, as failures a retry
 * would repeat.
 *
 * <p>Guarantee: each call either returns with the object there, made by this call or by a
 * concurrent creator, or throws what PostgreSQL answered. A lost race is tolerated only when the
 * object is found afterwards; any other failure, and a lost race after which it is still missing,
 * reaches the caller unchanged. Checking the shape of what is there remains the caller's job.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>Look the object up in the catalog (an unqualified name in {@code current_schema()}); if it
 *       is there, issue no DDL (a role that may use the objects but does not own them can call this
 *       once the schema is complete).
 *   <li>Run the DDL in a transaction of its own, or, on a connection in the caller's open
 *       transaction, behind a savepoint: losing the race then undoes only the DDL, and the caller's
 *       transaction stays usable for the next step and its own statements.
 *   <li>On {@code 23505}, {@code 42P07} or {@code 42710}: look the object up again (a new
 *       statement, so it sees the winner's commit) and return if it is there; else rethrow.
 * </ol>
 *
 * <p>Where the DDL runs, by {@code dsl}: over a {@code DataSource} (or a thread-bound or
 * framework's connection provider), jOOQ's transaction API decides (a transaction of its own, or a
 * savepoint inside a jOOQ transaction already open); over one connection ({@code
 * DSL.using(connection)}) with auto-commit on, a transaction of its own on it; with auto-commit
 * off, a savepoint in the caller's transaction, never committed by this call.
 */
public final class CreateIfMissing {

  /**
   * What PostgreSQL answers a {@code CREATE ... IF NOT EXISTS} that raced another creator of the
   * same object: {@code 23505} (its entry in {@code pg_type} or {@code pg_class}), {@code 42P07}
   * (duplicate table), {@code 42710} (duplicate object).
   */
  private static final Set<String> CREATED_CONCURRENTLY = Set.of("23505", "42P07", "42710");

  private CreateIfMissing() {}

  /**
   * Creates the table or sequence {@code relation} with {@code create} unless {@code to_regclass}
   * finds it where the {@code CREATE} would put it; see the class Javadoc. The catalog reads are
   * not bounded by a query timeout.
   *
   * @param relation the name the module's statements use: schema-qualified, or unqualified and
   *     looked up in {@code current_schema()} only (the first schema of the search path that
   *     exists, where an unqualified {@code CREATE} creates it)
   * @param create runs the {@code CREATE ... IF NOT EXISTS} on the context it is given
   */
  public static void relation(DSLContext dsl, Name relation, Consumer<DSLContext> create) {
    Objects.requireNonNull(relation, "relation");
    run(dsl, create, () -> relationExists(dsl, relation, 0));
  }

  /**
   * {@link #relation(DSLContext, Name, Consumer)} with each catalog read bounded by {@code
   * queryTimeout}, rounded up to whole seconds; bound the DDL itself in {@code create}.
   */
  public static void relation(
      DSLContext dsl, Name relation, Duration queryTimeout, Consumer<DSLContext> create) {
    Objects.requireNonNull(relation, "relation");
    int timeout = seconds(queryTimeout);
    run(dsl, create, () -> relationExists(dsl, relation, timeout));
  }

  /**
   * Creates the index {@code index} of {@code table} with {@code create} unless {@code table} has
   * an index of that name; see the class Javadoc. Looked up on the table, not by {@code
   * to_regclass}: an index takes its table's schema, and a relation of the same name elsewhere on
   * the search path must not stand for it.
   *
   * @param table the indexed table, resolved as the module's statements resolve it
   * @param index the index's name, unqualified, as {@code create} spells it
   * @param queryTimeout bounds each catalog read, rounded up to whole seconds
   * @param create runs the {@code CREATE INDEX IF NOT EXISTS} on the context it is given
   */
  public static void index(
      DSLContext dsl, Name table, Name index, Duration queryTimeout, Consumer<DSLContext> create) {
    Objects.requireNonNull(table, "table");
    Objects.requireNonNull(index, "index");
    int timeout = seconds(queryTimeout);
    run(dsl, create, () -> indexExists(dsl, table, index, timeout));
  }

  /**
   * True when {@code failure} is what a creator that lost the race to create an object answers
   * ({@code 23505}, {@code 42P07} or {@code 42710}); by itself it does not say the object is there.
   */
  public static boolean lostRace(DataAccessException failure) {
    return CREATED_CONCURRENTLY.contains(failure.sqlState());
  }

  private interface Lookup {
    boolean exists();
  }

  private static void run(DSLContext dsl, Consumer<DSLContext> create, Lookup lookup) {
    Objects.requireNonNull(dsl, "dsl");
    Objects.requireNonNull(create, "create");
    if (lookup.exists()) {
      return;
    }
    try {
      if (!(dsl.configuration().connectionProvider() instanceof DefaultConnectionProvider)) {
        // A pool, a thread-bound or a framework's provider: jOOQ's transaction API decides.
        dsl.transaction(configuration -> create.accept(configuration.dsl()));
      } else {
        dsl.connection(
            connection -> {
              // With auto-commit off the caller's transaction is open on this connection: behind
              // a savepoint instead of a transaction jOOQ would commit, so that losing the
              // creation race leaves the caller's transaction usable for the re-check, and the
              // caller's commit decides.
              DSLContext on =
                  connection.getAutoCommit()
                      ? dsl
                      : dsl.configuration().derive(new SavepointsOnly(connection)).dsl();
              on.transaction(configuration -> create.accept(configuration.dsl()));
            });
      }
    } catch (DataAccessException e) {
      if (!lostRace(e) || !lookup.exists()) {
        throw e;
      }
    }
  }

  private static boolean relationExists(DSLContext dsl, Name relation, int timeout) {
    return fetchTrue(
        dsl.resultQuery("select to_regclass({0}) is not null", whereCreated(relation)), timeout);
  }

  /**
   * The relation as {@code to_regclass} must look it up: a qualified name as it is; an unqualified
   * one in {@code current_schema()}, where {@code CREATE} puts it, not anywhere on the search path.
   * A table of the same name in a later schema on the path (another tenant's, an older deploy's)
   * must not stand for the one this call would create; statements then resolve to the created one,
   * which comes first on the path. No schema selected: null, so the {@code CREATE} runs and says
   * so.
   */
  private static Field<String> whereCreated(Name relation) {
    String quoted = SqlNames.regclass(relation);
    return relation.getName().length > 1
        ? val(quoted)
        : DSL.field("quote_ident(current_schema()) || '.' || {0}", String.class, val(quoted));
  }

  private static boolean indexExists(DSLContext dsl, Name table, Name index, int timeout) {
    return fetchTrue(
        dsl.resultQuery(
            "select exists (select 1 from pg_index i join pg_class c on c.oid = i.indexrelid"
                + " where i.indrelid = to_regclass({0}) and c.relname = {1})",
            whereCreated(table), val(index.last())),
        timeout);
  }

  private static boolean fetchTrue(ResultQuery<?> query, int timeout) {
    return Boolean.TRUE.equals(query.queryTimeout(timeout).fetchSingle().get(0, Boolean.class));
  }

  private static int seconds(Duration timeout) {
    if (timeout == null || timeout.isNegative() || timeout.isZero()) {
      throw new IllegalArgumentException(
          "CreateIfMissing: pass a positive query timeout, e.g. Duration.ofSeconds(5); got "
              + timeout);
    }
    long seconds = timeout.toSeconds() + (timeout.toNanosPart() > 0 ? 1 : 0);
    return (int) Math.max(1, Math.min(Integer.MAX_VALUE, seconds));
  }
}
