package dev.nolock.patterns;

import static org.jooq.impl.DSL.coalesce;
import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.when;

import io.vavr.control.Either;
import java.util.Arrays;
import java.util.Objects;
import java.util.function.Function;
import java.util.stream.Collectors;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Record3;
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
 * lock name), not each data row. A write that carries a {@link WriteId} and is retried with the
 * same lease and id after a lost answer commits once: the retry of an attempt that committed runs
 * nothing and answers {@link FencedWrite.AlreadyWritten}, provided no other write with a write id
 * committed under that lease in between.
 *
 * <p>Algorithm of {@link #write}, in one transaction:
 *
 * <ol>
 *   <li>Advance the lock's fence row: {@code INSERT ... (name, token, owner, last_write) VALUES
 *       (:lock, :t, :o, :id) ON CONFLICT (name) DO UPDATE SET token = :t, owner = :o, last_write =
 *       (CASE WHEN token < :t THEN :id ELSE coalesce(:id, last_write) END) WHERE token < :t OR
 *       (token = :t AND owner = :o AND (:id IS NULL OR last_write IS DISTINCT FROM :id))}; {@code
 *       :id} is the call's write id, or null without one. The conflicting row is locked whether or
 *       not it is updated, so concurrent writers for one lock are ordered by that row lock and each
 *       sees the token committed before it.
 *   <li>No row advanced: read the current token, owner and last write id. If they are the call's
 *       token, owner and write id, return {@link FencedWrite.AlreadyWritten} without running the
 *       caller's writes. Otherwise count the rejection and return it as a {@link FenceRejection}
 *       without running the caller's writes.
 *   <li>One row advanced: run the caller's writes on the same transaction and commit them together
 *       with the fence row. If the writes throw, everything rolls back.
 * </ol>
 *
 * Equal tokens pass only for the same owner: a backend that loses its counter (a Redis restart
 * without persistence, a lease row deleted on release) can hand the same token out again, and the
 * fence must not take the second holder for the first. So an owner names one grant, not a process
 * ({@link GrantOwner}: {@code FencedLock} passes {@code owner#nonce}), or two threads of one
 * process holding the reissued token would both pass.
 *
 * <p>A lost answer: when the connection drops after the server applied the {@code COMMIT}, the
 * caller gets jOOQ's {@link org.jooq.exception.DataAccessException} (SQLState {@code 08006}) and
 * cannot tell whether its writes committed. Retried without a write id, the same lease passes the
 * fence again and the writes run a second time, so <b>writes without a write id must be
 * idempotent</b> (set a value, not add to it). With a write id, the retry of a write that committed
 * runs nothing and answers {@link FencedWrite.AlreadyWritten}.
 *
 * <p>The fence remembers only the latest write id per lock, for the grant (token and owner) that
 * made it; a write without an id leaves it in place, a higher token replaces it (with its own id,
 * or none). So a retry is recognised only while no other write with a write id has committed under
 * the same lease since its first attempt: retry a write whose answer was lost before making the
 * next one. If another write did commit in between, the retry runs again; re-read the data to
 * decide instead of retrying. After a {@link FenceRejection} on a retry, the earlier attempt may or
 * may not have committed before the newer holder's writes: re-read the data if it matters.
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

  private static final String LAST_WRITE = "last_write";

  private final Name tableName;
  private final Table<?> table;
  private final Table<?> alias;
  private final Field<String> name;
  private final Field<Long> token;
  private final Field<String> owner;
  private final Field<String> lastWrite;
  private final Field<Long> aliasToken;
  private final Field<String> aliasOwner;
  private final Field<String> aliasLastWrite;
  private final CoordinationMetrics metrics;

  private Fence(Name tableName, CoordinationMetrics metrics) {
    this.tableName = tableName;
    this.table = table(tableName);
    this.alias = table.as("f");
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.lastWrite =
        field(name(LAST_WRITE), SQLDataType.VARCHAR(WriteId.MAX_LENGTH).nullable(true));
    this.aliasToken = field(name("f", "token"), SQLDataType.BIGINT);
    this.aliasOwner = field(name("f", "owner"), SQLDataType.VARCHAR);
    this.aliasLastWrite = field(name("f", LAST_WRITE), SQLDataType.VARCHAR);
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
   * bigint not null check (token > 0), owner varchar(255) not null, last_write varchar(255))}, and
   * adds the {@code last_write} column to a table made by an earlier version ({@code ALTER TABLE
   * ... ADD COLUMN IF NOT EXISTS}).
   *
   * <p>It looks the table and column up in the catalog first and issues DDL only for what is
   * missing, so a role that may write the table but does not own it can call this once the schema
   * is complete.
   */
  public void createTableIfMissing(DSLContext dsl) {
    Objects.requireNonNull(dsl, "dsl");
    if (!tableExists(dsl)) {
      dsl.createTableIfNotExists(table)
          .column(name)
          .column(token)
          .column(owner)
          .column(lastWrite)
          .primaryKey(name)
          .check(token.gt(0L))
          .execute();
    }
    if (!lastWriteColumnExists(dsl)) {
      dsl.alterTable(table).addColumnIfNotExists(lastWrite).execute();
    }
  }

  private boolean tableExists(DSLContext dsl) {
    return dsl.fetchSingle("select to_regclass(?) is not null", regclass()).get(0, Boolean.class);
  }

  private boolean lastWriteColumnExists(DSLContext dsl) {
    return dsl.fetchSingle(
            "select exists (select 1 from pg_catalog.pg_attribute"
                + " where attrelid = to_regclass(?) and attname = ? and not attisdropped)",
            regclass(),
            LAST_WRITE)
        .get(0, Boolean.class);
  }

  /** The table's name as to_regclass reads it, resolved on the same search_path as the DDL. */
  private String regclass() {
    // Each part is a validated [a-z_][a-z0-9_]* identifier; quoting keeps keywords literal.
    return Arrays.stream(tableName.getName())
        .map(part -> '"' + part + '"')
        .collect(Collectors.joining("."));
  }

  /**
   * Runs {@code writes} in one transaction with the advance of {@code lease}'s fence row, or
   * refuses them.
   *
   * <p>Without a write id, <b>the writes must be idempotent</b>: if the connection drops after the
   * server applied the {@code COMMIT}, this throws jOOQ's {@link
   * org.jooq.exception.DataAccessException} (SQLState {@code 08006}) although the writes committed,
   * and the same call retried passes the fence again and runs them a second time. For writes that
   * are not idempotent (adding to a balance), use {@link #write(DSLContext, Lease, WriteId,
   * Function)}.
   *
   * @param dsl where to run; a {@code DSLContext} already in a transaction gets a savepoint
   * @param lease the lease the writes are made under; its name, owner and token are checked
   * @param writes the protected data writes, run on the fenced transaction's context
   * @return the writes' result, or the rejection when the lease's token is stale; on a rejection
   *     nothing was written
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed:
   *     unknown whether written
   */
  public <T> Either<FenceRejection, T> write(
      DSLContext dsl, Lease lease, Function<DSLContext, ? extends T> writes) {
    return this.<T>run(dsl, lease, null, writes)
        .map(written -> ((FencedWrite.Applied<T>) written).result());
  }

  /**
   * Runs {@code writes} in one transaction with the advance of {@code lease}'s fence row, unless
   * the fence refuses them or an earlier call with the same lease and {@code writeId} already
   * committed them.
   *
   * <p>Choose {@code writeId} once per intended write and pass the same id when retrying it after
   * an exception whose outcome is unknown (a lost {@code COMMIT} answer is jOOQ's {@link
   * org.jooq.exception.DataAccessException} with SQLState {@code 08006}). The retry then answers:
   *
   * <ul>
   *   <li>{@link FencedWrite.Applied}: the earlier attempt had not committed; this one did.
   *   <li>{@link FencedWrite.AlreadyWritten}: the earlier attempt committed; nothing ran now. The
   *       lease still holds the fence.
   *   <li>{@link FenceRejection}: a newer holder (or the same token from another owner) has written
   *       through the fence; stop writing. The earlier attempt may have committed before it:
   *       re-read the data if that matters.
   * </ul>
   *
   * The fence remembers only the latest write id per lock: retry before making another write with a
   * write id under the same lease, or the retry is not recognised and runs again.
   *
   * @param dsl where to run; a {@code DSLContext} already in a transaction gets a savepoint
   * @param lease the lease the writes are made under; its name, owner and token are checked
   * @param writeId the caller's id of this intended write, the same on each of its retries
   * @param writes the protected data writes, run on the fenced transaction's context
   * @return what happened, or the rejection when the lease's token is stale; on a rejection and on
   *     {@link FencedWrite.AlreadyWritten} this call wrote nothing
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed:
   *     unknown whether written; retry with the same {@code writeId}
   */
  public <T> Either<FenceRejection, FencedWrite<T>> write(
      DSLContext dsl, Lease lease, WriteId writeId, Function<DSLContext, ? extends T> writes) {
    Objects.requireNonNull(
        writeId,
        "writeId: pass WriteId.of(...) chosen once per intended write, or call write(dsl, lease,"
            + " writes) if the writes are idempotent");
    return run(dsl, lease, writeId, writes);
  }

  private <T> Either<FenceRejection, FencedWrite<T>> run(
      DSLContext dsl, Lease lease, WriteId writeId, Function<DSLContext, ? extends T> writes) {
    Objects.requireNonNull(dsl, "dsl");
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(writes, "writes");
    return dsl.transactionResult(
        configuration -> {
          DSLContext tx = configuration.dsl();
          int advanced = advance(tx, lease, writeId);
          if (advanced == 0) {
            return notAdvanced(tx, lease, writeId);
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
          return Either.right(new FencedWrite.Applied<>(writeId, writes.apply(tx)));
        });
  }

  private int advance(DSLContext tx, Lease lease, WriteId writeId) {
    long t = lease.token().value();
    return tx.insertInto(alias, name, token, owner, lastWrite)
        .values(lease.name(), t, lease.owner(), writeId == null ? null : writeId.value())
        .onConflict(name)
        .doUpdate()
        .set(token, excluded(token))
        .set(owner, excluded(owner))
        // A new grant starts with its own id (or none); within a grant an id-less write keeps the
        // last id, so it does not make a lost-answer retry of that id run again.
        .set(
            lastWrite,
            when(aliasToken.lt(excluded(token)), excluded(lastWrite))
                .otherwise(coalesce(excluded(lastWrite), aliasLastWrite)))
        .where(
            aliasToken
                .lt(excluded(token))
                .or(
                    aliasToken
                        .eq(excluded(token))
                        .and(aliasOwner.eq(excluded(owner)))
                        .and(
                            excluded(lastWrite)
                                .isNull()
                                .or(aliasLastWrite.isDistinctFrom(excluded(lastWrite))))))
        .execute();
  }

  private <T> Either<FenceRejection, FencedWrite<T>> notAdvanced(
      DSLContext tx, Lease lease, WriteId writeId) {
    Record3<Long, String, String> current =
        tx.select(token, owner, lastWrite).from(table).where(name.eq(lease.name())).fetchSingle();
    FencingToken currentToken = FencingToken.of(current.value1());
    String currentOwner = current.value2();
    if (writeId != null
        && currentToken.equals(lease.token())
        && currentOwner.equals(lease.owner())
        && writeId.value().equals(current.value3())) {
      return Either.right(
          new FencedWrite.AlreadyWritten<>(lease.name(), lease.token(), lease.owner(), writeId));
    }
    metrics.fenceRejected();
    return Either.left(
        new FenceRejection(lease.name(), lease.token(), lease.owner(), currentToken, currentOwner));
  }
}
