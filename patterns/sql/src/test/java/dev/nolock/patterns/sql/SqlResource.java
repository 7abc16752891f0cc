package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.Lease;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.util.Objects;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The protected resource of the lock scenarios: one row per lock name in PostgreSQL, written
 * through the SQL {@link Fence} or, for the negative control, around it. Needs jOOQ and pgjdbc on
 * the test classpath.
 *
 * <p>It lives in this module's test jar, not in testkit: testkit depends on nothing of the SQL
 * layer, so that this module's own tests can use testkit's extensions without a dependency cycle.
 */
public final class SqlResource {

  private final DSLContext dsl;
  private final Table<?> table;
  private final Field<String> lock =
      field(DSL.name("lock_name"), SQLDataType.VARCHAR(255).nullable(false));
  private final Field<String> value = field(DSL.name("value"), SQLDataType.VARCHAR(255));
  private final Fence fence;

  private SqlResource(DSLContext dsl, String table, Fence fence) {
    this.dsl = Objects.requireNonNull(dsl, "dsl");
    this.table = table(SqlNames.requireSqlIdentifier("resource table", table));
    this.fence = Objects.requireNonNull(fence, "fence");
  }

  /** A resource in {@code table}, fenced by a {@link Fence} on {@link Fence#DEFAULT_TABLE}. */
  public static SqlResource on(DSLContext dsl, String table) {
    return on(dsl, table, Fence.onTable(Fence.DEFAULT_TABLE));
  }

  /** A resource in {@code table}, fenced by {@code fence}. */
  public static SqlResource on(DSLContext dsl, String table, Fence fence) {
    return new SqlResource(dsl, table, fence);
  }

  /** Creates the resource table and the fence table if they do not exist. */
  public SqlResource createTablesIfMissing() {
    fence.createTableIfMissing(dsl);
    dsl.createTableIfNotExists(table).column(lock).column(value).primaryKey(lock).execute();
    return this;
  }

  /**
   * Sets the lock's row to {@code newValue}, through the fence or around it.
   *
   * @return true when the resource accepted the write
   */
  public boolean write(Lease lease, String newValue, Protection protection) {
    Function<DSLContext, Integer> upsert =
        tx ->
            tx.insertInto(table, lock, value)
                .values(lease.name(), newValue)
                .onConflict(lock)
                .doUpdate()
                .set(value, newValue)
                .execute();
    if (protection == Protection.UNFENCED) {
      dsl.transaction(c -> upsert.apply(c.dsl()));
      return true;
    }
    return fence.write(dsl, lease, upsert::apply).isRight();
  }

  /** The lock's row, read directly. */
  public Option<String> read(String lockName) {
    return Option.ofOptional(
        dsl.select(value).from(table).where(lock.eq(lockName)).fetchOptional(value));
  }
}
