package dev.nolock.queue.internal;

import static org.jooq.impl.DSL.concat;
import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.min;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.row;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.selectOne;
import static org.jooq.impl.DSL.val;
import static org.jooq.impl.DSL.when;

import dev.nolock.patterns.sql.LeasedRow;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.queue.JobState;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertValuesStep9;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.ResultQuery;
import org.jooq.Row2;
import org.jooq.SelectConditionStep;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The jobs table and every statement on it, in jOOQ's typed DSL. The table name is an already
 * validated identifier; every caller value is bound.
 *
 * <p>The state constants ({@code 'ready'}, {@code 'running'}, ...) are <em>inlined</em>, on
 * purpose: they are constants, not caller values, and the partial indexes are defined with them.
 * The planner can use a partial index only when it can prove the query's condition implies the
 * index's predicate; {@code state = $1} proves nothing once pgjdbc switches to a server-side
 * prepared statement with a generic plan, and the claim would fall back to scanning every finished
 * job.
 */
public final class JobsTable {

  /** Jobs reaped per statement; the reaper loops while a pass comes back full. */
  public static final int REAP_BATCH = 500;

  /** Longest last error stored; longer ones are cut (the tail goes first). */
  public static final int MAX_ERROR_LENGTH = 8_000;

  private static final String J = "j";
  private static final String C = "c";

  private final Name tableName;
  private final String indexPrefix;
  private final Table<Record> table;
  private final Table<Record> j;
  private final LeasedRow leased;

  public final Field<Long> id =
      field(name("id"), SQLDataType.BIGINT.nullable(false).identity(true));
  public final Field<String> queue = field(name("queue"), SQLDataType.VARCHAR(100).nullable(false));
  public final Field<String> state = field(name("state"), SQLDataType.VARCHAR(16).nullable(false));
  public final Field<Long> attempt = field(name("attempt"), SQLDataType.BIGINT.nullable(false));
  public final Field<Integer> failures =
      field(name("failures"), SQLDataType.INTEGER.nullable(false));
  public final Field<Integer> maxAttempts =
      field(name("max_attempts"), SQLDataType.INTEGER.nullable(false));
  public final Field<OffsetDateTime> runAt =
      field(name("run_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  public final Field<OffsetDateTime> lockedUntil =
      field(name("locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));
  public final Field<byte[]> payload = field(name("payload"), SQLDataType.BLOB.nullable(false));
  public final Field<String> uniqueKey =
      field(name("unique_key"), SQLDataType.VARCHAR(255).nullable(true));
  public final Field<String> lastError = field(name("last_error"), SQLDataType.CLOB.nullable(true));
  public final Field<OffsetDateTime> enqueuedAt =
      field(name("enqueued_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  public final Field<OffsetDateTime> finishedAt =
      field(name("finished_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));

  // The same columns qualified with the alias "j", for statements that join the CTE "c".
  private final Field<Long> jId = field(name(J, "id"), SQLDataType.BIGINT);
  private final Field<Long> jAttempt = field(name(J, "attempt"), SQLDataType.BIGINT);
  private final Field<Integer> jFailures = field(name(J, "failures"), SQLDataType.INTEGER);
  private final Field<Integer> jMaxAttempts = field(name(J, "max_attempts"), SQLDataType.INTEGER);
  private final Field<String> jState = field(name(J, "state"), SQLDataType.VARCHAR);
  private final Field<OffsetDateTime> jLockedUntil =
      field(name(J, "locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  private final Field<OffsetDateTime> jRunAt =
      field(name(J, "run_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  private final Field<Long> cId = field(name(C, "id"), SQLDataType.BIGINT);

  /** The columns a claim returns, qualified with the alias. */
  public final List<Field<?>> claimed =
      List.of(
          jId,
          jAttempt,
          field(name(J, "payload"), SQLDataType.BLOB),
          field(name(J, "unique_key"), SQLDataType.VARCHAR),
          jRunAt,
          field(name(J, "enqueued_at"), SQLDataType.TIMESTAMPWITHTIMEZONE),
          jLockedUntil,
          jFailures,
          jMaxAttempts);

  public JobsTable(Name tableName) {
    this.tableName = tableName;
    this.indexPrefix = tableName.last();
    this.table = DSL.table(tableName);
    this.j = table.as(J);
    this.leased = LeasedRow.of(tableName, "locked_until", "attempt");
  }

  public Table<Record> table() {
    return table;
  }

  private static Field<String> literal(JobState s) {
    return inline(s.sqlValue());
  }

  private Condition isState(Field<String> column, JobState s) {
    return column.eq(literal(s));
  }

  private Condition pendingPredicate() {
    return uniqueKey.isNotNull().and(state.in(literal(JobState.READY), literal(JobState.RUNNING)));
  }

  // ---------------------------------------------------------------------------------------------
  // DDL

  /** Every column, in the table's order; nullable exactly where a statement writes NULL. */
  public List<Field<?>> columns() {
    return List.of(
        id,
        queue,
        state,
        attempt,
        failures,
        maxAttempts,
        runAt,
        lockedUntil,
        payload,
        uniqueKey,
        lastError,
        enqueuedAt,
        finishedAt);
  }

  /** {@code state IN ('ready', 'running', 'done', 'dead', 'cancelled')}: every state written. */
  public Condition stateCheck() {
    return state.in(
        literal(JobState.READY),
        literal(JobState.RUNNING),
        literal(JobState.DONE),
        literal(JobState.DEAD),
        literal(JobState.CANCELLED));
  }

  /**
   * The table and its five partial indexes, the table first; every statement is {@code IF NOT
   * EXISTS}.
   */
  public List<Query> createSchema(DSLContext dsl) {
    List<Query> ddl = new ArrayList<>();
    ddl.add(
        dsl.createTableIfNotExists(table)
            .column(id)
            .column(queue)
            .column(state, state.getDataType().default_(literal(JobState.READY)))
            .column(attempt, attempt.getDataType().default_(inline(0L)))
            .column(failures, failures.getDataType().default_(inline(0)))
            .column(maxAttempts)
            .column(runAt, runAt.getDataType().default_(PgClock.now()))
            .column(lockedUntil)
            .column(payload)
            .column(uniqueKey)
            .column(lastError)
            .column(enqueuedAt, enqueuedAt.getDataType().default_(PgClock.now()))
            .column(finishedAt)
            .primaryKey(id)
            .check(stateCheck())
            .check(attempt.ge(inline(0L)))
            .check(failures.ge(inline(0)))
            .check(maxAttempts.ge(inline(1))));
    // Claims walk this index in (run_at, id) order and see only ready jobs: finished jobs are not
    // in it, so the claim's cost does not grow with them.
    ddl.add(
        dsl.createIndexIfNotExists(indexPrefix + "_ready_idx")
            .on(table, queue, runAt, id)
            .where(isState(state, JobState.READY)));
    // The reaper's scan for expired leases.
    ddl.add(
        dsl.createIndexIfNotExists(indexPrefix + "_running_idx")
            .on(table, queue, lockedUntil)
            .where(isState(state, JobState.RUNNING)));
    // Retention deletes the oldest finished jobs first.
    ddl.add(
        dsl.createIndexIfNotExists(indexPrefix + "_done_idx")
            .on(table, queue, finishedAt)
            .where(isState(state, JobState.DONE)));
    // Dead-letter pages walk this index in id order from their keyset position and see only dead
    // jobs: without it a page walks the primary key past every other job of the table.
    ddl.add(
        dsl.createIndexIfNotExists(indexPrefix + "_dead_idx")
            .on(table, queue, id)
            .where(isState(state, JobState.DEAD)));
    // Uniqueness holds while a job is pending (ready or running), not forever.
    ddl.add(
        dsl.createUniqueIndexIfNotExists(indexPrefix + "_pending_key_idx")
            .on(table, queue, uniqueKey)
            .where(pendingPredicate()));
    return ddl;
  }

  // ---------------------------------------------------------------------------------------------
  // Enqueue

  /** One row of an insert: the values and how run_at is computed. */
  public record NewRow(
      byte[] payload, String uniqueKey, int maxAttempts, OffsetDateTime runAt, Duration delay) {}

  /**
   * {@code INSERT INTO t (queue, state, attempt, failures, max_attempts, run_at, payload,
   * unique_key, enqueued_at) VALUES (...), ... ON CONFLICT (queue, unique_key) WHERE unique_key IS
   * NOT NULL AND state IN ('ready', 'running') DO NOTHING RETURNING id, unique_key}.
   */
  public ResultQuery<Record2<Long, String>> insert(
      DSLContext dsl, String queueName, List<NewRow> rows) {
    InsertValuesStep9<
            Record,
            String,
            String,
            Long,
            Integer,
            Integer,
            OffsetDateTime,
            byte[],
            String,
            OffsetDateTime>
        insert =
            dsl.insertInto(
                table,
                queue,
                state,
                attempt,
                failures,
                maxAttempts,
                runAt,
                payload,
                uniqueKey,
                enqueuedAt);
    for (NewRow r : rows) {
      Field<OffsetDateTime> when = r.runAt() != null ? val(r.runAt(), runAt) : after(r.delay());
      insert =
          insert.values(
              val(queueName, queue),
              literal(JobState.READY),
              inline(0L),
              inline(0),
              val(r.maxAttempts(), maxAttempts),
              when,
              val(r.payload(), payload),
              val(r.uniqueKey(), uniqueKey),
              PgClock.now());
    }
    return insert
        .onConflict(queue, uniqueKey)
        .where(pendingPredicate())
        .doNothing()
        .returningResult(id, uniqueKey);
  }

  // ---------------------------------------------------------------------------------------------
  // Claim

  /**
   * The claim, one statement:
   *
   * <pre>
   * WITH c AS MATERIALIZED (
   *   SELECT id FROM t
   *   WHERE queue = :queue AND state = 'ready' AND run_at &lt;= clock_timestamp()
   *   ORDER BY run_at, id LIMIT :n FOR UPDATE SKIP LOCKED)
   * UPDATE t AS j SET state = 'running', attempt = j.attempt + 1,
   *                   locked_until = clock_timestamp() + :lease
   * FROM c WHERE j.id = c.id
   * RETURNING j.id, j.attempt, j.payload, ...
   * </pre>
   *
   * <p>MATERIALIZED makes PostgreSQL run the locking select exactly once: written as {@code WHERE
   * id IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)} the planner may re-run the subquery (for
   * example as the inner side of a nested loop) and lock, and claim, more than {@code n} rows.
   *
   * <p>Not the shared {@link LeasedRow#claim}: that one inserts or takes over one row by its key,
   * taking it when its lease ran out. A claim here picks up to {@code n} ready rows that other
   * workers do not hold, and never takes an expired lease over: the reaper gives such a job back,
   * counting the lost attempt as a failure.
   */
  public ResultQuery<Record> claim(DSLContext dsl, String queueName, int max, Duration lease) {
    CommonTableExpression<Record1<Long>> c =
        name(C)
            .asMaterialized(
                select(id)
                    .from(table)
                    .where(queue.eq(queueName))
                    .and(isState(state, JobState.READY))
                    .and(runAt.le(PgClock.now()))
                    .orderBy(runAt, id)
                    .limit(val(max))
                    .forUpdate()
                    .skipLocked());
    return dsl.with(c)
        .update(j)
        .set(state, literal(JobState.RUNNING))
        .set(attempt, jAttempt.plus(inline(1L)))
        .set(lockedUntil, PgClock.plus(lease))
        .from(c)
        .where(jId.eq(cId))
        .returningResult(claimed);
  }

  // ---------------------------------------------------------------------------------------------
  // Finish: every statement is conditional on (queue, id, attempt, state = 'running').
  //
  // Complete, fail and release are not the shared LeasedRow.finish: that ends the lease at
  // clock_timestamp() and keeps it, where a job that is not running has no lease at all
  // (locked_until NULL, which find() and the dead letters report as "not leased"), and each also
  // moves the job's state.

  private Condition heldBy(String queueName, long jobId, long jobAttempt) {
    return queue
        .eq(queueName)
        .and(id.eq(jobId))
        .and(attempt.eq(jobAttempt))
        .and(isState(state, JobState.RUNNING));
  }

  /**
   * {@code SELECT id FROM t WHERE queue = :q AND (id, attempt) IN ((:id, :attempt), ...) AND state
   * = 'running'}: the jobs of a batch still held by the given attempts.
   */
  private SelectConditionStep<Record1<Long>> running(
      String queueName, Collection<long[]> idAndAttempt) {
    List<Row2<Long, Long>> rows = new ArrayList<>(idAndAttempt.size());
    for (long[] pair : idAndAttempt) {
      rows.add(row(val(pair[0], id), val(pair[1], attempt)));
    }
    return select(id)
        .from(table)
        .where(queue.eq(queueName))
        .and(row(id, attempt).in(rows))
        .and(isState(state, JobState.RUNNING));
  }

  /**
   * {@code UPDATE t SET state = 'done', locked_until = NULL, finished_at = clock_timestamp() WHERE
   * queue = :q AND id = :id AND attempt = :attempt AND state = 'running' RETURNING run_at}.
   */
  public ResultQuery<Record1<OffsetDateTime>> complete(
      DSLContext dsl, String queueName, long jobId, long jobAttempt) {
    return dsl.update(table)
        .set(state, literal(JobState.DONE))
        .setNull(lockedUntil)
        .set(finishedAt, PgClock.now())
        .where(heldBy(queueName, jobId, jobAttempt))
        .returningResult(runAt);
  }

  /**
   * The batch form of {@link #complete}:
   *
   * <pre>
   * WITH c AS MATERIALIZED (
   *   SELECT id FROM t WHERE queue = :q AND (id, attempt) IN ((:id, :attempt), ...)
   *   AND state = 'running' ORDER BY id FOR UPDATE)
   * UPDATE t AS j SET state = 'done', locked_until = NULL, finished_at = clock_timestamp()
   * FROM c WHERE j.id = c.id RETURNING j.id, j.attempt, j.run_at
   * </pre>
   *
   * <p>The rows are locked in id order, so two batches that share jobs (a stale attempt's and the
   * re-claim's) wait for each other instead of deadlocking; after a wait, PostgreSQL re-checks the
   * attempt and state on the newest row version. Two attempts of one job may both be in the batch
   * (a process that lost a job to its own reaper and claimed it again); at most one matches the
   * row, and the returned attempt says which.
   */
  public ResultQuery<Record3<Long, Long, OffsetDateTime>> completeAll(
      DSLContext dsl, String queueName, Collection<long[]> idAndAttempt) {
    CommonTableExpression<Record1<Long>> c =
        name(C).asMaterialized(running(queueName, idAndAttempt).orderBy(id).forUpdate());
    return dsl.with(c)
        .update(j)
        .set(state, literal(JobState.DONE))
        .setNull(lockedUntil)
        .set(finishedAt, PgClock.now())
        .from(c)
        .where(jId.eq(cId))
        .returningResult(jId, jAttempt, jRunAt);
  }

  /**
   * {@code UPDATE t SET failures = failures + 1, last_error = :error, locked_until = NULL, state =
   * CASE WHEN failures + 1 >= max_attempts THEN 'dead' ELSE 'ready' END, run_at = CASE ... THEN
   * run_at ELSE clock_timestamp() + :backoff END, finished_at = CASE ... THEN clock_timestamp() END
   * WHERE <held by this attempt> RETURNING state, run_at}.
   */
  public ResultQuery<Record2<String, OffsetDateTime>> fail(
      DSLContext dsl,
      String queueName,
      long jobId,
      long jobAttempt,
      String error,
      Duration backoff) {
    Condition exhausted = failures.plus(inline(1)).ge(maxAttempts);
    return dsl.update(table)
        .set(failures, failures.plus(inline(1)))
        .set(lastError, val(truncate(error), lastError))
        .setNull(lockedUntil)
        .set(state, when(exhausted, literal(JobState.DEAD)).otherwise(literal(JobState.READY)))
        .set(runAt, when(exhausted, runAt).otherwise(after(backoff)))
        .set(finishedAt, when(exhausted, PgClock.now()).otherwise(inline((OffsetDateTime) null)))
        .where(heldBy(queueName, jobId, jobAttempt))
        .returningResult(state, runAt);
  }

  /**
   * {@code UPDATE t SET state = 'ready', locked_until = NULL WHERE <held by this attempt> RETURNING
   * run_at}: back in the queue at its old place, without counting a failure.
   */
  public ResultQuery<Record1<OffsetDateTime>> release(
      DSLContext dsl, String queueName, long jobId, long jobAttempt) {
    return dsl.update(table)
        .set(state, literal(JobState.READY))
        .setNull(lockedUntil)
        .where(heldBy(queueName, jobId, jobAttempt))
        .returningResult(runAt);
  }

  /**
   * {@code UPDATE t SET locked_until = clock_timestamp() + :lease WHERE <held by this attempt> AND
   * locked_until > clock_timestamp() RETURNING locked_until}: the shared {@link LeasedRow#extend},
   * a compare-and-swap on the attempt token that extends only a lease that has not expired yet,
   * never a blind bump. One row, so it can wait only on a lock on that job.
   */
  public ResultQuery<Record1<OffsetDateTime>> heartbeat(
      DSLContext dsl, String queueName, long jobId, long jobAttempt, Duration lease) {
    return leased
        .extend(dsl, heldBy(queueName, jobId, jobAttempt), lease, Map.of())
        .returningResult(lockedUntil);
  }

  /**
   * The same for many jobs, without ever waiting:
   *
   * <pre>
   * WITH c AS MATERIALIZED (
   *   SELECT id FROM t WHERE queue = :q AND (id, attempt) IN ((:id, :attempt), ...)
   *   AND state = 'running' AND locked_until &gt; clock_timestamp() FOR UPDATE SKIP LOCKED)
   * UPDATE t AS j SET locked_until = clock_timestamp() + :lease FROM c WHERE j.id = c.id
   * RETURNING j.id, j.attempt, j.locked_until
   * </pre>
   *
   * <p>A plain multi-row {@code UPDATE} would wait for a row another transaction holds (typically
   * this worker's own completion of one of the jobs) while keeping the rows it already extended
   * locked. If the worker is paused right then, its completion never commits, the heartbeat never
   * finishes, and the reaper and claims skip the jobs it locked for as long as the pause lasts:
   * their leases would not expire. Skipping locked rows leaves them to the next heartbeat. That is
   * why this is not {@link LeasedRow#extend}, a plain {@code UPDATE}; it shares its condition
   * ({@link LeasedRow#unexpired}) and its lease end ({@link PgClock#plus}).
   */
  public ResultQuery<Record3<Long, Long, OffsetDateTime>> heartbeatWithoutWaiting(
      DSLContext dsl, String queueName, Collection<long[]> idAndAttempt, Duration lease) {
    CommonTableExpression<Record1<Long>> c =
        name(C)
            .asMaterialized(
                running(queueName, idAndAttempt).and(leased.unexpired()).forUpdate().skipLocked());
    return dsl.with(c)
        .update(j)
        .set(lockedUntil, PgClock.plus(lease))
        .from(c)
        .where(jId.eq(cId))
        .returningResult(jId, jAttempt, jLockedUntil);
  }

  /**
   * {@code VACUUM (SKIP_LOCKED) t}: must run outside a transaction block. SKIP_LOCKED returns at
   * once when another VACUUM (another pool's, or autovacuum) holds the table.
   */
  public Query vacuum(DSLContext dsl) {
    return dsl.query("VACUUM (SKIP_LOCKED) {0}", table);
  }

  /** {@code SELECT state, attempt, run_at FROM t WHERE queue = :q AND id = :id}. */
  public ResultQuery<Record3<String, Long, OffsetDateTime>> current(
      DSLContext dsl, String queueName, long jobId) {
    return dsl.select(state, attempt, runAt)
        .from(table)
        .where(queue.eq(queueName))
        .and(id.eq(jobId));
  }

  /**
   * The row a fail of this attempt left, if that is what the job shows now: {@code SELECT state,
   * run_at FROM t WHERE queue = :q AND id = :id AND attempt = :attempt AND state IN ('ready',
   * 'dead') AND failures = :failuresBefore + 1 AND last_error IS NOT DISTINCT FROM :error}. The
   * attempt changes only with a claim, so only this attempt's fail or the reaper can have left it
   * ready or dead at this attempt with one more failure, and the reaper's error names the expired
   * lease; the retry of a dead letter ({@link AdminSql}) resets the failures.
   */
  public ResultQuery<Record2<String, OffsetDateTime>> failedBy(
      DSLContext dsl,
      String queueName,
      long jobId,
      long jobAttempt,
      int failuresBefore,
      String error) {
    return dsl.select(state, runAt)
        .from(table)
        .where(queue.eq(queueName))
        .and(id.eq(jobId))
        .and(attempt.eq(jobAttempt))
        .and(state.in(literal(JobState.READY), literal(JobState.DEAD)))
        .and(failures.eq(failuresBefore + 1))
        .and(lastError.isNotDistinctFrom(val(truncate(error), lastError)));
  }

  /**
   * The row a release of this attempt left, if that is what the job shows now: {@code SELECT run_at
   * FROM t WHERE queue = :q AND id = :id AND attempt = :attempt AND state = 'ready' AND failures =
   * :failuresBefore AND run_at = :runAt}. A release keeps the failures and {@code run_at}; the
   * reaper and a fail count a failure, the retry of a dead letter moves {@code run_at} to now.
   */
  public ResultQuery<Record1<OffsetDateTime>> releasedBy(
      DSLContext dsl,
      String queueName,
      long jobId,
      long jobAttempt,
      int failuresBefore,
      OffsetDateTime claimedRunAt) {
    return dsl.select(runAt)
        .from(table)
        .where(queue.eq(queueName))
        .and(id.eq(jobId))
        .and(attempt.eq(jobAttempt))
        .and(isState(state, JobState.READY))
        .and(failures.eq(failuresBefore))
        .and(runAt.eq(claimedRunAt));
  }

  // ---------------------------------------------------------------------------------------------
  // Reaper, dead letters, retention

  /**
   * {@code WITH c AS MATERIALIZED (SELECT id FROM t WHERE queue = :q AND state = 'running' AND
   * locked_until < clock_timestamp() ORDER BY locked_until LIMIT :n FOR UPDATE SKIP LOCKED) UPDATE
   * t AS j SET failures = j.failures + 1, locked_until = NULL, last_error = 'the lease of attempt '
   * || j.attempt || ' expired ...', state = CASE WHEN j.failures + 1 >= j.max_attempts THEN 'dead'
   * ELSE 'ready' END, finished_at = CASE ... THEN clock_timestamp() END FROM c WHERE j.id = c.id
   * RETURNING j.state}. {@code run_at} is kept, so the job goes back to the front.
   */
  public ResultQuery<Record1<String>> reap(DSLContext dsl, String queueName, int max) {
    CommonTableExpression<Record1<Long>> c =
        name(C)
            .asMaterialized(
                select(id)
                    .from(table)
                    .where(queue.eq(queueName))
                    .and(isState(state, JobState.RUNNING))
                    .and(lockedUntil.lt(PgClock.now()))
                    .orderBy(lockedUntil)
                    .limit(val(max))
                    .forUpdate()
                    .skipLocked());
    Condition exhausted = jFailures.plus(inline(1)).ge(jMaxAttempts);
    return dsl.with(c)
        .update(j)
        .set(failures, jFailures.plus(inline(1)))
        .setNull(lockedUntil)
        .set(
            lastError,
            concat(
                inline("the lease of attempt "),
                jAttempt.cast(SQLDataType.VARCHAR),
                inline(" expired at "),
                jLockedUntil.cast(SQLDataType.VARCHAR),
                inline(" without a finish or heartbeat (worker crashed, paused or too slow)")))
        .set(state, when(exhausted, literal(JobState.DEAD)).otherwise(literal(JobState.READY)))
        .set(finishedAt, when(exhausted, PgClock.now()).otherwise(inline((OffsetDateTime) null)))
        .from(c)
        .where(jId.eq(cId))
        .returningResult(jState);
  }

  /**
   * {@code WITH c AS MATERIALIZED (SELECT id FROM t WHERE queue = :q AND state = 'done' AND
   * finished_at < clock_timestamp() - :age ORDER BY finished_at LIMIT :n FOR UPDATE SKIP LOCKED)
   * DELETE FROM t AS j USING c WHERE j.id = c.id}. Locks only finished rows, which no claim
   * touches, and skips rows someone else holds, so it never waits on a worker.
   */
  public Query purge(DSLContext dsl, String queueName, Duration olderThan, int max) {
    CommonTableExpression<Record1<Long>> c =
        name(C)
            .asMaterialized(
                select(id)
                    .from(table)
                    .where(queue.eq(queueName))
                    .and(isState(state, JobState.DONE))
                    .and(finishedAt.lt(PgClock.minus(olderThan)))
                    .orderBy(finishedAt)
                    .limit(val(max))
                    .forUpdate()
                    .skipLocked());
    return dsl.with(c).delete(j).using(c).where(jId.eq(cId));
  }

  /**
   * {@code SELECT (SELECT count(*) FROM (SELECT 1 FROM t WHERE queue = :q AND state = 'ready' AND
   * run_at <= clock_timestamp() LIMIT :cap) s), (SELECT min(run_at) FROM t WHERE queue = :q AND
   * state = 'ready'), clock_timestamp()}: both read the ready index only.
   */
  public ResultQuery<Record3<Integer, OffsetDateTime, OffsetDateTime>> readyStats(
      DSLContext dsl, String queueName, int cap) {
    Table<?> due =
        selectOne()
            .from(table)
            .where(queue.eq(queueName))
            .and(isState(state, JobState.READY))
            .and(runAt.le(PgClock.now()))
            .limit(val(cap))
            .asTable("s");
    Field<Integer> depth = field(select(count()).from(due));
    Field<OffsetDateTime> oldest =
        field(
            select(min(runAt))
                .from(table)
                .where(queue.eq(queueName))
                .and(isState(state, JobState.READY)));
    return dsl.select(depth, oldest, PgClock.now());
  }

  /**
   * {@link PgClock#plus} of {@code delay}, or {@code clock_timestamp()} alone for zero, the usual
   * enqueue: one bind value fewer per row and one statement text for every due-now batch.
   */
  private static Field<OffsetDateTime> after(Duration delay) {
    return delay.isZero() ? PgClock.now() : PgClock.plus(delay);
  }

  private static String truncate(String error) {
    if (error == null) {
      return null;
    }
    return error.length() <= MAX_ERROR_LENGTH ? error : error.substring(0, MAX_ERROR_LENGTH);
  }

  @Override
  public String toString() {
    return tableName.toString();
  }
}
