package dev.nolock.patterns;

import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import io.vavr.control.Either;
import java.util.Objects;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Record2;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;

/**
 * The resource-side check that makes a TTL lock safe: a write carrying a stale {@link FencingToken}
 * is refused by the database, whatever the writer believes about its lease.
 *
 * <p>Guarantee: for each lock name, once a write with token {@code t} from owner {@code o} has
 * committed, no write with a token lower than {@code t}, and none with {@code t} from another
 * owner, commits through this fence. A refused write changes nothing, including rows that the newer
 * holder has not touched yet, because the fence guards what the <em>lock</em> guards (one row per
 * lock name), not each data row.
 *
 * <p>Algorithm of {@link #write}, in one transaction:
 *
 * <ol>
 *   <li>Advance the lock's fence row: {@code INSERT ... ON CONFLICT (name) DO UPDATE SET token =
 *       :t, owner = :o WHERE token < :t OR (token = :t AND owner = :o)}. The conflicting row is
 *       locked whether or not it is updated, so concurrent writers for one lock are ordered by that
 *       row lock and each sees the token committed before it.
 *   <li>No row advanced: read the current token and owner, count the rejection and return it as a
 *       {@link FenceRejection} without running the caller's writes.
 *   <li>One row advanced: run the caller's writes on the same transaction and commit them together
 *       with the fence row. If the writes throw, everything rolls back.
 * </ol>
 *
 * Equal tokens pass only for the same owner: a backend that loses its counter (a Redis restart
 * without persistence, a lease row deleted on release) can hand the same token out again, and the
 * fence must not take the second holder for the first.
 *
 * <p>Use it under PostgreSQL's default READ COMMITTED isolation. Under REPEATABLE READ or
 * SERIALIZABLE a concurrent advance of the same fence row aborts the transaction with a
 * serialization failure instead of a rejection value; that is still safe, but the caller sees an
 * exception. Inside a caller's own transaction jOOQ runs this as a savepoint; on a rejection the
 * caller must roll back anything it wrote before.
 *
 * <p>Immutable and thread-safe. The table comes from configuration and is validated as an SQL
 * identifier; every value is bound.
 */
public final class Fence {

  /** The table name used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_fences";

  private final Table<?> table;
  private final Table<?> alias;
  private final Field<String> name;
  private final Field<Long> token;
  private final Field<String> owner;
  private final Field<Long> aliasToken;
  private final Field<String> aliasOwner;
  private final CoordinationMetrics metrics;

  private Fence(Name tableName, CoordinationMetrics metrics) {
    this.table = table(tableName);
    this.alias = table.as("f");
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.aliasToken = field(name("f", "token"), SQLDataType.BIGINT);
    this.aliasOwner = field(name("f", "owner"), SQLDataType.VARCHAR);
    this.metrics = Objects.requireNonNull(metrics, "metrics");
  }

  /**
   * A fence on {@code table} (optionally {@code schema.table}), counting rejections in {@code
   * metrics}.
   */
  public static Fence onTable(String table, CoordinationMetrics metrics) {
    return new Fence(Names.requireSqlIdentifier("fence table", table), metrics);
  }

  /** A fence on {@code table} that records no metrics. */
  public static Fence onTable(String table) {
    return onTable(table, CoordinationMetrics.noop());
  }

  /**
   * Creates the fence table if it does not exist: {@code (name varchar(255) primary key, token
   * bigint not null check (token > 0), owner varchar(255) not null)}.
   */
  public void createTableIfMissing(DSLContext dsl) {
    dsl.createTableIfNotExists(table)
        .column(name)
        .column(token)
        .column(owner)
        .primaryKey(name)
        .check(token.gt(0L))
        .execute();
  }

  /**
   * Runs {@code writes} in one transaction with the advance of {@code lease}'s fence row, or
   * refuses them.
   *
   * @param dsl where to run; a {@code DSLContext} already in a transaction gets a savepoint
   * @param lease the lease the writes are made under; its name, owner and token are checked
   * @param writes the protected data writes, run on the fenced transaction's context
   * @return the writes' result, or the rejection when the lease's token is stale; on a rejection
   *     nothing was written
   */
  public <T> Either<FenceRejection, T> write(
      DSLContext dsl, Lease lease, Function<DSLContext, ? extends T> writes) {
    Objects.requireNonNull(dsl, "dsl");
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(writes, "writes");
    return dsl.transactionResult(
        configuration -> {
          DSLContext tx = configuration.dsl();
          int advanced = advance(tx, lease);
          if (advanced == 0) {
            metrics.fenceRejected();
            return Either.left(rejection(tx, lease));
          }
          if (advanced != 1) {
            throw new IllegalStateException(
                "The fence advanced "
                    + advanced
                    + " rows for one lock name: the fence table "
                    + table
                    + " has lost its primary key on name. Recreate it with"
                    + " createTableIfMissing on an empty schema.");
          }
          return Either.right(writes.apply(tx));
        });
  }

  private int advance(DSLContext tx, Lease lease) {
    long t = lease.token().value();
    return tx.insertInto(alias, name, token, owner)
        .values(lease.name(), t, lease.owner())
        .onConflict(name)
        .doUpdate()
        .set(token, excluded(token))
        .set(owner, excluded(owner))
        .where(
            aliasToken
                .lt(excluded(token))
                .or(aliasToken.eq(excluded(token)).and(aliasOwner.eq(excluded(owner)))))
        .execute();
  }

  private FenceRejection rejection(DSLContext tx, Lease lease) {
    Record2<Long, String> current =
        tx.select(token, owner).from(table).where(name.eq(lease.name())).fetchSingle();
    return new FenceRejection(
        lease.name(),
        lease.token(),
        lease.owner(),
        FencingToken.of(current.value1()),
        current.value2());
  }
}
