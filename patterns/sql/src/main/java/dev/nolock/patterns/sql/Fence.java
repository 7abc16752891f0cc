package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencedWrite;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.WriteId;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Either;
import java.sql.Connection;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Objects;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConnectionProvider;
import org.jooq.impl.SQLDataType;

/**
 * The resource-side check that makes a TTL lock safe: a write carrying a stale {@link FencingToken}
 * is refused by the database, whatever the writer believes about its lease.
 *
 * <p>Guarantee: for each lock name, once a write with token {@code t} from owner {@code o} has
 * committed, no write with a token lower than {@code t}, and none with {@code t} from another
 * owner, commits through this fence. A refused write changes nothing, including rows that the newer
 * holder has not touched yet, because the fence guards what the <em>lock</em> guards (one row per
 * lock name), not each data row. A write that carries a {@link WriteId} commits at most once per
 * lock name while its id is kept (see {@link #forgetWritesOlderThan}): a later call with the same
 * lock name and id, from any grant and after any number of other writes, runs nothing and answers
 * {@link FencedWrite.AlreadyWritten}, naming the grant that wrote it.
 *
 * <p>Two tables: the fence table (one row per lock name: the highest token and its owner) and the
 * write-id table (one row per lock name and write id that committed: the token and owner that wrote
 * it and when, by the server's clock). Algorithm of {@link #write}, in one transaction (its own, or
 * the caller's behind a savepoint, see below):
 *
 * <ol>
 *   <li>Advance the lock's fence row: {@code INSERT INTO fences AS f (name, token, owner) VALUES
 *       (:lock, :t, :o) ON CONFLICT (name) DO UPDATE SET token = excluded.token, owner =
 *       excluded.owner WHERE f.token < excluded.token OR (f.token = excluded.token AND f.owner =
 *       excluded.owner)}. The conflicting row is locked whether or not it is updated, and stays
 *       locked until the transaction ends, so writers for one lock are ordered by that row lock and
 *       each sees what the one before it committed.
 *   <li>With a write id: {@code SELECT token, owner FROM writes WHERE name = :lock AND write_id =
 *       :id}. Every write id of a lock is recorded by a transaction that holds the lock's fence row
 *       until it commits, and this statement runs after step 1 took that row, so under READ
 *       COMMITTED it sees every id of the lock that committed, and no recording of this id is in
 *       flight. Found: roll back (this call's advance too) and return {@link
 *       FencedWrite.AlreadyWritten} with the recorded token and owner, whatever this call's token;
 *       the caller's writes never run.
 *   <li>No row advanced in step 1: count the rejection and return it as a {@link FenceRejection};
 *       the caller's writes never run and nothing changed.
 *   <li>One row advanced: with a write id, {@code INSERT INTO writes (name, write_id, token, owner,
 *       written_at) VALUES (:lock, :id, :t, :o, clock_timestamp())}; then run the caller's writes
 *       on the same transaction and commit them together with the fence row and the id. If the
 *       writes throw (a checked exception or not), everything this call wrote rolls back, the fence
 *       row's advance and the id with it, and the exception is rethrown unchanged.
 * </ol>
 *
 * Two attempts with one id at once are ordered by the fence row: the second runs step 2 after the
 * first has committed (it finds the id: {@code AlreadyWritten}) or rolled back (it does not: it may
 * apply). Never both apply.
 *
 * <p>Equal tokens pass only for the same owner: a backend that loses its counter (a Redis restart
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
 * runs nothing and answers {@link FencedWrite.AlreadyWritten}, under the same lease or a new one.
 *
 * <p>Retention: write ids are kept until {@link #forgetWritesOlderThan} deletes them. Run it
 * periodically with a retention longer than any retry can take; a retry after its id was forgotten
 * runs again.
 *
 * <p>Use it under PostgreSQL's default READ COMMITTED isolation. Under REPEATABLE READ or
 * SERIALIZABLE a concurrent advance of the same fence row aborts the transaction with a
 * serialization failure instead of a rejection value; that is still safe, but the caller sees an
 * exception.
 *
 * <p>Whose transaction: a {@code DSLContext} over a {@code DataSource} runs each call in a
 * transaction of its own, committed before the call returns. A {@code DSLContext} over one
 * connection (for example {@code DSL.using(connection)}), or a plain {@link Connection} (the
 * overloads), joins the caller's open transaction when there is one (auto-commit off, or a jOOQ
 * transaction the caller opened): the steps run behind a savepoint and the call <b>never
 * commits</b>; the caller's commit or rollback decides for the fenced writes and the fence row
 * together. With auto-commit on, the call is its own transaction on that connection. In the
 * caller's transaction, the caller must roll its whole transaction back on {@link
 * FencedWrite.AlreadyWritten} as on a rejection: the caller's own statements before the fenced
 * write ran again on a retry, and only the fenced writes were recognised.
 *
 * <p>Immutable and thread-safe. The table names come from configuration and are validated as SQL
 * identifiers; every value is bound.
 */
public final class Fence {

  /** The table name used when none is configured. */
  public static final String DEFAULT_TABLE = "nolock_fences";

  /** Appended to the fence table's name to name its write-id table, unless one is configured. */
  public static final String WRITES_SUFFIX = "_writes";

  private final Name tableName;
  private final Name writesName;
  private final Table<?> table;
  private final Table<?> alias;
  private final Table<?> writesTable;
  private final Field<String> name;
  private final Field<Long> token;
  private final Field<String> owner;
  private final Field<String> writeIdColumn;
  private final Field<OffsetDateTime> writtenAt;
  private final Field<Long> aliasToken;
  private final Field<String> aliasOwner;
  private final CoordinationMetrics metrics;

  private Fence(Name tableName, Name writesName, CoordinationMetrics metrics) {
    this.tableName = tableName;
    this.writesName = writesName;
    this.table = table(tableName);
    this.alias = table.as("f");
    this.writesTable = table(writesName);
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.writeIdColumn =
        field(name("write_id"), SQLDataType.VARCHAR(WriteId.MAX_LENGTH).nullable(false));
    this.writtenAt = field(name("written_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
    this.aliasToken = field(name("f", "token"), SQLDataType.BIGINT);
    this.aliasOwner = field(name("f", "owner"), SQLDataType.VARCHAR);
    this.metrics = Objects.requireNonNull(metrics, "metrics");
  }

  /**
   * A fence on {@code table} (optionally {@code schema.table}), with its write ids in {@code
   * table_writes} (see {@link #WRITES_SUFFIX}), counting rejections ({@code
   * nolock.fence.rejections}) in {@code registry}, tagged {@code component="fence"} and {@code
   * name=instanceName} (one configured name per fence, never a per-write key).
   */
  public static Fence onTable(String table, MeterRegistry registry, String instanceName) {
    return onTable(table, CoordinationMetrics.of(registry, "fence", instanceName));
  }

  private static Fence onTable(String table, CoordinationMetrics metrics) {
    Name tableName = SqlNames.requireSqlIdentifier("fence table", table);
    String derived = table + WRITES_SUFFIX;
    if (tableName.last().length() + WRITES_SUFFIX.length() > SqlNames.MAX_SQL_IDENTIFIER_LENGTH) {
      throw new IllegalArgumentException(
          "The fence table \""
              + table
              + "\" is too long to name its write-id table \""
              + derived
              + "\" (at most "
              + SqlNames.MAX_SQL_IDENTIFIER_LENGTH
              + " characters a part): shorten it, or name the write-id table with"
              + " Fence.onTables(fenceTable, writesTable).");
    }
    return new Fence(tableName, SqlNames.requireSqlIdentifier("write-id table", derived), metrics);
  }

  /**
   * A fence on {@code table} that records no metrics; see {@link #onTable(String, MeterRegistry,
   * String)}.
   */
  public static Fence onTable(String table) {
    return onTable(table, CoordinationMetrics.noop());
  }

  /**
   * A fence on {@code fenceTable} with its write ids in {@code writesTable} (each optionally {@code
   * schema.table}), counting rejections in {@code registry} as {@link #onTable(String,
   * MeterRegistry, String)} does.
   */
  public static Fence onTables(
      String fenceTable, String writesTable, MeterRegistry registry, String instanceName) {
    return onTables(
        fenceTable, writesTable, CoordinationMetrics.of(registry, "fence", instanceName));
  }

  /**
   * A fence on {@code fenceTable} with its write ids in {@code writesTable} that records no
   * metrics; see {@link #onTables(String, String, MeterRegistry, String)}.
   */
  public static Fence onTables(String fenceTable, String writesTable) {
    return onTables(fenceTable, writesTable, CoordinationMetrics.noop());
  }

  private static Fence onTables(
      String fenceTable, String writesTable, CoordinationMetrics metrics) {
    Name tableName = SqlNames.requireSqlIdentifier("fence table", fenceTable);
    Name writesName = SqlNames.requireSqlIdentifier("write-id table", writesTable);
    if (tableName.equals(writesName)) {
      throw new IllegalArgumentException(
          "The fence table and the write-id table are both \""
              + fenceTable
              + "\": give the write-id table its own name, e.g. \""
              + fenceTable
              + WRITES_SUFFIX
              + "\".");
    }
    return new Fence(tableName, writesName, metrics);
  }

  /**
   * Creates the fence table and the write-id table if they do not exist:
   *
   * <pre>{@code
   * fences (name varchar(255) primary key, token bigint not null check (token > 0),
   *         owner varchar(255) not null)
   * fences_writes (name varchar(255), write_id varchar(255), token bigint not null,
   *                owner varchar(255) not null, written_at timestamptz not null,
   *                primary key (name, write_id))
   * }</pre>
   *
   * A fence table made by an earlier version is left as it is and gets its write-id table.
   *
   * <p>It looks each table up in the catalog first and issues DDL only for what is missing, so a
   * role that may write the tables but does not own them can call this once the schema is complete.
   * Processes that start at once may all call it: a creator that loses the race to another
   * (SQLState {@code 23505}, {@code 42P07} or {@code 42710}) finds the table there and carries on
   * ({@link CreateIfMissing}).
   *
   * @param dsl where to run: over a {@code DataSource}, a transaction of its own per table,
   *     committed; over one connection with auto-commit off (the caller's open transaction), inside
   *     that transaction behind a savepoint, never committed by this call: the caller's commit
   *     creates the tables, its rollback undoes them
   */
  public void createTableIfMissing(DSLContext dsl) {
    Objects.requireNonNull(dsl, "dsl");
    CreateIfMissing.relation(
        dsl,
        tableName,
        tx ->
            tx.createTableIfNotExists(table)
                .column(name)
                .column(token)
                .column(owner)
                .primaryKey(name)
                .check(token.gt(0L))
                .execute());
    CreateIfMissing.relation(
        dsl,
        writesName,
        tx ->
            tx.createTableIfNotExists(writesTable)
                .column(name)
                .column(writeIdColumn)
                .column(token)
                .column(owner)
                .column(writtenAt)
                .primaryKey(name, writeIdColumn)
                .check(token.gt(0L))
                .execute());
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
   * SqlWork)}.
   *
   * <p>Writes that throw, a checked exception or not: what this call wrote rolls back with them
   * (its own transaction, or its savepoint in the caller's), the fence row is not advanced, and the
   * exception reaches the caller unchanged, the same instance.
   *
   * @param dsl where to run: over a {@code DataSource}, a transaction of its own, committed; over
   *     one connection in the caller's open transaction (auto-commit off, or inside a jOOQ
   *     transaction), that transaction behind a savepoint, never committed by this call, and on a
   *     rejection the caller must roll back what it wrote before
   * @param lease the lease the writes are made under; its name, owner and token are checked
   * @param writes the protected data writes, run on the fenced transaction's context
   * @return the writes' result, or the rejection when the lease's token is stale; on a rejection
   *     nothing was written
   * @throws X what the writes threw, after the rollback of this call's part
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed:
   *     unknown whether written
   */
  public <T, X extends Exception> Either<FenceRejection, T> write(
      DSLContext dsl, Lease lease, SqlWork<? extends T, X> writes) throws X {
    return this.<T, X>run(dsl, lease, null, writes)
        .map(written -> ((FencedWrite.Applied<T>) written).result());
  }

  /**
   * Runs {@code writes} in one transaction with the advance of {@code lease}'s fence row and the
   * record of {@code writeId}, unless a call with the same lock name and {@code writeId} already
   * committed them, or the fence refuses them.
   *
   * <p>Choose {@code writeId} once per intended write and pass the same id when retrying it after
   * an exception whose outcome is unknown (a lost {@code COMMIT} answer is jOOQ's {@link
   * org.jooq.exception.DataAccessException} with SQLState {@code 08006}), under the same lease or a
   * new one. The retry then answers:
   *
   * <ul>
   *   <li>{@link FencedWrite.Applied}: no attempt had committed; this one did.
   *   <li>{@link FencedWrite.AlreadyWritten}: an earlier attempt committed, under the grant it
   *       names; nothing ran now. It says nothing about whether this lease still holds the fence.
   *   <li>{@link FenceRejection}: no attempt had committed, and a newer holder (or the same token
   *       from another owner) has written through the fence; stop writing.
   * </ul>
   *
   * The id is kept until {@link #forgetWritesOlderThan} deletes it; a retry after that runs again.
   *
   * <p>In the caller's own transaction ({@code dsl} already in one): roll your transaction back on
   * {@link FencedWrite.AlreadyWritten} too, as on a rejection. Your statements before this call ran
   * again in the retried transaction; committing them next to {@code AlreadyWritten} applies them
   * twice.
   *
   * <p>Writes that throw, a checked exception or not: this call's part rolls back, the id with it
   * (a retry with the same id runs), and the exception reaches the caller unchanged.
   *
   * @param dsl where to run: over a {@code DataSource}, a transaction of its own, committed; over
   *     one connection in the caller's open transaction, that transaction behind a savepoint, never
   *     committed by this call
   * @param lease the lease the writes are made under; its name, owner and token are checked
   * @param writeId the caller's id of this intended write, the same on each of its retries, unique
   *     among the lock's writes while it is kept
   * @param writes the protected data writes, run on the fenced transaction's context
   * @return what happened, or the rejection when the lease's token is stale; on a rejection and on
   *     {@link FencedWrite.AlreadyWritten} this call wrote nothing
   * @throws X what the writes threw, after the rollback of this call's part
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed:
   *     unknown whether written; retry with the same {@code writeId}
   */
  public <T, X extends Exception> Either<FenceRejection, FencedWrite<T>> write(
      DSLContext dsl, Lease lease, WriteId writeId, SqlWork<? extends T, X> writes) throws X {
    Objects.requireNonNull(
        writeId,
        "writeId: pass WriteId.of(...) chosen once per intended write, or call write(dsl, lease,"
            + " writes) if the writes are idempotent");
    return run(dsl, lease, writeId, writes);
  }

  /**
   * {@link #write(DSLContext, Lease, SqlWork)} on a plain JDBC connection, in the caller's open
   * transaction when there is one.
   *
   * <ul>
   *   <li>Auto-commit off (the caller's transaction is open): the fence row, the writes and nothing
   *       else run inside that transaction behind a savepoint; this call <b>never commits</b>. A
   *       rejection or writes that throw roll back to the savepoint: the caller's earlier
   *       statements stay in place, the transaction stays usable, and what the writes threw reaches
   *       the caller unchanged. Otherwise the caller's own commit or rollback decides for the
   *       fenced writes too (a rollback undoes them and the fence row's advance).
   *   <li>Auto-commit on: the call is a transaction of its own on the connection, committed before
   *       it returns; auto-commit is on again afterwards.
   * </ul>
   *
   * The writes may use {@code connection} directly as well: it is the same transaction.
   *
   * @param connection a PostgreSQL connection; not closed by this call
   * @throws X what the writes threw, after the rollback of this call's part
   * @throws IllegalArgumentException when {@code connection} is null
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed:
   *     unknown whether written if the call committed on its own (auto-commit on); in the caller's
   *     transaction nothing is committed until the caller commits
   */
  public <T, X extends Exception> Either<FenceRejection, T> write(
      Connection connection, Lease lease, SqlWork<? extends T, X> writes) throws X {
    return write(onConnection(connection), lease, writes);
  }

  /**
   * {@link #write(DSLContext, Lease, WriteId, SqlWork)} on a plain JDBC connection, in the caller's
   * open transaction when there is one, never committing it: see {@link #write(Connection, Lease,
   * SqlWork)}. In the caller's transaction the write id is recorded in that transaction, so it
   * counts only once the caller commits; roll back on {@link FencedWrite.AlreadyWritten} as on a
   * rejection.
   *
   * @param connection a PostgreSQL connection; not closed by this call
   * @throws X what the writes threw, after the rollback of this call's part
   * @throws IllegalArgumentException when {@code connection} is null
   */
  public <T, X extends Exception> Either<FenceRejection, FencedWrite<T>> write(
      Connection connection, Lease lease, WriteId writeId, SqlWork<? extends T, X> writes)
      throws X {
    return write(onConnection(connection), lease, writeId, writes);
  }

  private static DSLContext onConnection(Connection connection) {
    if (connection == null) {
      throw new IllegalArgumentException(
          "The connection is null: pass an open PostgreSQL connection, with auto-commit off to"
              + " write in your own transaction.");
    }
    return DSL.using(connection, SQLDialect.POSTGRES);
  }

  /**
   * Deletes the write ids recorded more than {@code retention} ago by the server's clock, and
   * returns how many. Run it periodically (a scheduled job, one statement) with a retention longer
   * than any retry of a fenced write can take, the caller's own retries and backoff included: a
   * retry after its id was forgotten is not recognised and runs its writes again.
   *
   * @param retention how long to keep each id, positive
   * @throws org.jooq.exception.DataAccessException when PostgreSQL or the connection failed
   */
  public int forgetWritesOlderThan(DSLContext dsl, Duration retention) {
    Objects.requireNonNull(dsl, "dsl");
    if (retention == null || retention.isNegative() || retention.isZero()) {
      throw new IllegalArgumentException(
          "The write-id retention is "
              + retention
              + ": pass a positive duration longer than any retry of a fenced write can take,"
              + " e.g. Duration.ofDays(7).");
    }
    return dsl.deleteFrom(writesTable)
        .where(
            writtenAt.lt(
                field(
                    "clock_timestamp() - ({0} * interval '1 millisecond')",
                    SQLDataType.TIMESTAMPWITHTIMEZONE, val(retention.toMillis()))))
        .execute();
  }

  private <T, X extends Exception> Either<FenceRejection, FencedWrite<T>> run(
      DSLContext dsl, Lease lease, WriteId writeId, SqlWork<? extends T, X> writes) throws X {
    Objects.requireNonNull(dsl, "dsl");
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(writes, "writes");
    try {
      if (!(dsl.configuration().connectionProvider() instanceof DefaultConnectionProvider)) {
        // A pool, a thread-bound or a framework's provider: only jOOQ's transaction API (and the
        // framework behind it) knows whether a transaction is open, so it decides: a transaction
        // of the call's own, or a nested one inside the transaction it has open.
        return inOwnTransaction(dsl, lease, writeId, writes);
      }
      // One plain connection (DSL.using(connection), or the Connection overloads): with
      // auto-commit off the caller's transaction is open on it, and this call must join it, never
      // commit it.
      return dsl.connectionResult(
          connection ->
              connection.getAutoCommit()
                  ? inOwnTransaction(dsl, lease, writeId, writes)
                  : inCallersTransaction(connection, dsl, lease, writeId, writes));
    } catch (WorkThrew threw) {
      // Out of the transaction (or the savepoint) now, rolled back: the writes' own exception.
      throw threw.<X>original();
    }
  }

  /** Steps 1 to 4 in a transaction that jOOQ begins and commits or rolls back. */
  private <T> Either<FenceRejection, FencedWrite<T>> inOwnTransaction(
      DSLContext dsl, Lease lease, WriteId writeId, SqlWork<? extends T, ?> writes) {
    try {
      return dsl.transactionResult(
          configuration -> fenced(configuration.dsl(), lease, writeId, writes));
    } catch (AlreadyWrittenRollback rolledBack) {
      return Either.right(rolledBack.answer());
    }
  }

  /**
   * Steps 1 to 4 inside the caller's open transaction on {@code connection}, behind a savepoint,
   * never committing. Every jOOQ transaction begun on the way (this call's, and any the writes open
   * themselves) is a savepoint ({@link SavepointsOnly}). A rejection, an {@code AlreadyWritten} or
   * writes that throw roll back to the savepoint: this call's part only, including the fence row's
   * lock that the refused upsert took, and the transaction stays usable. Otherwise the savepoint is
   * released and the caller's commit or rollback decides for everything.
   */
  private <T> Either<FenceRejection, FencedWrite<T>> inCallersTransaction(
      Connection connection,
      DSLContext dsl,
      Lease lease,
      WriteId writeId,
      SqlWork<? extends T, ?> writes) {
    DSLContext joined = dsl.configuration().derive(new SavepointsOnly(connection)).dsl();
    try {
      return joined.transactionResult(
          configuration -> {
            Either<FenceRejection, FencedWrite<T>> result =
                fenced(configuration.dsl(), lease, writeId, writes);
            if (result.isLeft()) {
              throw new RejectedRollback(result.getLeft());
            }
            return result;
          });
    } catch (AlreadyWrittenRollback rolledBack) {
      return Either.right(rolledBack.answer());
    } catch (RejectedRollback rejected) {
      return Either.left(rejected.rejection);
    }
  }

  /**
   * Steps 1 to 4 on {@code tx}; throws {@link AlreadyWrittenRollback} for step 2's answer, and
   * {@link WorkThrew} around an exception of the writes (jOOQ would wrap a checked one in a {@link
   * DataAccessException} on its way out of the transaction).
   */
  private <T> Either<FenceRejection, FencedWrite<T>> fenced(
      DSLContext tx, Lease lease, WriteId writeId, SqlWork<? extends T, ?> writes) {
    int advanced = advance(tx, lease);
    if (advanced > 1) {
      throw new IllegalStateException(
          "The fence advanced "
              + advanced
              + " rows for one lock name: the fence table "
              + table
              + " has lost its primary key on name. Recreate it with"
              + " createTableIfMissing on an empty schema.");
    }
    if (writeId != null) {
      Optional<FencedWrite.AlreadyWritten<T>> earlier = recorded(tx, lease, writeId);
      if (earlier.isPresent()) {
        throw new AlreadyWrittenRollback(earlier.get());
      }
    }
    if (advanced == 0) {
      return Either.left(rejected(tx, lease));
    }
    if (writeId != null) {
      record(tx, lease, writeId);
    }
    T result = WorkThrew.call(writes, tx);
    return Either.right(new FencedWrite.Applied<>(writeId, result));
  }

  private int advance(DSLContext tx, Lease lease) {
    return tx.insertInto(alias, name, token, owner)
        .values(lease.name(), lease.token().value(), lease.owner())
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

  private <T> Optional<FencedWrite.AlreadyWritten<T>> recorded(
      DSLContext tx, Lease lease, WriteId writeId) {
    return tx.select(token, owner)
        .from(writesTable)
        .where(name.eq(lease.name()).and(writeIdColumn.eq(writeId.value())))
        .fetchOptional()
        .map(
            writer ->
                new FencedWrite.AlreadyWritten<>(
                    lease.name(), FencingToken.of(writer.value1()), writer.value2(), writeId));
  }

  private void record(DSLContext tx, Lease lease, WriteId writeId) {
    tx.insertInto(writesTable, name, writeIdColumn, token, owner, writtenAt)
        .values(
            val(lease.name()),
            val(writeId.value()),
            val(lease.token().value()),
            val(lease.owner()),
            field("clock_timestamp()", SQLDataType.TIMESTAMPWITHTIMEZONE))
        .execute();
  }

  private FenceRejection rejected(DSLContext tx, Lease lease) {
    var current = tx.select(token, owner).from(table).where(name.eq(lease.name())).fetchSingle();
    metrics.fenceRejected();
    return new FenceRejection(
        lease.name(),
        lease.token(),
        lease.owner(),
        FencingToken.of(current.value1()),
        current.value2());
  }

  /** Thrown out of the savepoint to undo a rejected call's part, the fence row's lock included. */
  private static final class RejectedRollback extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final transient FenceRejection rejection;

    RejectedRollback(FenceRejection rejection) {
      super(null, null, false, false);
      this.rejection = rejection;
    }
  }

  /**
   * Thrown out of the fenced transaction to roll back this call's advance of the fence row when the
   * write id had already committed: the answer is that nothing ran, so nothing may change.
   */
  private static final class AlreadyWrittenRollback extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final transient FencedWrite.AlreadyWritten<?> earlier;

    AlreadyWrittenRollback(FencedWrite.AlreadyWritten<?> earlier) {
      super(null, null, false, false);
      this.earlier = earlier;
    }

    <T> FencedWrite.AlreadyWritten<T> answer() {
      return new FencedWrite.AlreadyWritten<>(
          earlier.lockName(), earlier.token(), earlier.owner(), earlier.writeId());
    }
  }
}
