package dev.nolock.queue.internal;

import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.sql.PgClock;
import dev.nolock.queue.JobState;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import org.jooq.CommonTableExpression;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record5;
import org.jooq.ResultQuery;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The administration's statements on the jobs table ({@link JobsTable}'s columns): look-ups, the
 * cancel, the reschedule, the dead-letter page and the retry of one dead letter. Every change is
 * conditional on the state it starts from, so a claim racing it either wins (the row is no longer
 * {@code ready}, and the change matches nothing) or loses (the claim skips, or re-checks and drops,
 * the row the change locked). State constants are inlined, as in {@link JobsTable}.
 */
public final class AdminSql {

  private final JobsTable t;
  private final Table<Record> table;

  public AdminSql(JobsTable jobs) {
    this.t = jobs;
    this.table = jobs.table();
  }

  private static Field<String> literal(JobState s) {
    return inline(s.sqlValue());
  }

  /** The columns a look-up returns, in this order. */
  public List<Field<?>> columns() {
    return List.of(
        t.id,
        t.state,
        t.attempt,
        t.failures,
        t.maxAttempts,
        t.runAt,
        t.enqueuedAt,
        t.lockedUntil,
        t.finishedAt,
        t.uniqueKey,
        t.lastError,
        t.payload);
  }

  /** {@code SELECT <columns> FROM t WHERE queue = :q AND id = :id}. */
  public ResultQuery<Record> find(DSLContext dsl, String queueName, long jobId) {
    return dsl.select(columns()).from(table).where(t.queue.eq(queueName)).and(t.id.eq(jobId));
  }

  /**
   * {@code SELECT state, attempt, run_at, finished_at, clock_timestamp() FROM t WHERE queue = :q
   * AND id = :id}: what a refused change reports.
   */
  public ResultQuery<Record5<String, Long, OffsetDateTime, OffsetDateTime, OffsetDateTime>> current(
      DSLContext dsl, String queueName, long jobId) {
    return dsl.select(t.state, t.attempt, t.runAt, t.finishedAt, PgClock.now())
        .from(table)
        .where(t.queue.eq(queueName))
        .and(t.id.eq(jobId));
  }

  /**
   * {@code UPDATE t SET state = 'cancelled', finished_at = clock_timestamp() WHERE queue = :q AND
   * id = :id AND state = 'ready' RETURNING finished_at}. Against a claim: the claim that locked the
   * row first makes this statement wait, and PostgreSQL re-checks {@code state = 'ready'} on the
   * claimed row version, which fails; the cancel that locked it first makes the claim skip it.
   */
  public ResultQuery<Record1<OffsetDateTime>> cancel(DSLContext dsl, String queueName, long jobId) {
    return dsl.update(table)
        .set(t.state, literal(JobState.CANCELLED))
        .set(t.finishedAt, PgClock.now())
        .where(t.queue.eq(queueName))
        .and(t.id.eq(jobId))
        .and(t.state.eq(literal(JobState.READY)))
        .returningResult(t.finishedAt);
  }

  /**
   * {@code UPDATE t SET run_at = :at WHERE queue = :q AND id = :id AND state = 'ready' AND run_at
   * <> :at AND :at > clock_timestamp() RETURNING run_at}: the same race as {@link #cancel}, never
   * into the past on the database's clock, and a job already at {@code :at} is left alone (the
   * follow-up read answers it, so a resend is told an earlier call did it).
   */
  public ResultQuery<Record1<OffsetDateTime>> reschedule(
      DSLContext dsl, String queueName, long jobId, OffsetDateTime at) {
    Field<OffsetDateTime> when = val(at, t.runAt);
    return dsl.update(table)
        .set(t.runAt, when)
        .where(t.queue.eq(queueName))
        .and(t.id.eq(jobId))
        .and(t.state.eq(literal(JobState.READY)))
        .and(t.runAt.ne(when))
        .and(when.gt(PgClock.now()))
        .returningResult(t.runAt);
  }

  /**
   * {@code SELECT <columns> FROM t WHERE queue = :q AND state = 'dead' AND id > :after ORDER BY id
   * LIMIT :n}: keyset paging on the job id, so rows added or revived meanwhile never shift a page.
   * It reads the partial index {@code (queue, id) WHERE state = 'dead'} from {@code after}, so a
   * page examines its own rows only, however many other jobs the table keeps.
   */
  public ResultQuery<Record> deadLetters(DSLContext dsl, String queueName, long after, int n) {
    return dsl.select(columns())
        .from(table)
        .where(t.queue.eq(queueName))
        .and(t.state.eq(literal(JobState.DEAD)))
        .and(t.id.gt(after))
        .orderBy(t.id)
        .limit(val(n));
  }

  /**
   * {@code UPDATE t SET state = 'ready', failures = 0, run_at = clock_timestamp(), locked_until =
   * NULL, finished_at = NULL WHERE queue = :q AND id = :id AND attempt = :attempt AND state =
   * 'dead' RETURNING run_at}: the revival of the dead letter this attempt left. Only a claim
   * changes the attempt and only a revival takes a job out of {@code dead}, so a row no longer dead
   * at this attempt was revived.
   */
  public ResultQuery<Record1<OffsetDateTime>> retry(
      DSLContext dsl, String queueName, long jobId, long deadAttempt) {
    return dsl.update(table)
        .set(t.state, literal(JobState.READY))
        .set(t.failures, inline(0))
        .set(t.runAt, PgClock.now())
        .setNull(t.lockedUntil)
        .setNull(t.finishedAt)
        .where(t.queue.eq(queueName))
        .and(t.id.eq(jobId))
        .and(t.attempt.eq(deadAttempt))
        .and(t.state.eq(literal(JobState.DEAD)))
        .returningResult(t.runAt);
  }

  /**
   * {@code SELECT id FROM t WHERE queue = :q AND unique_key = :key AND state IN ('ready',
   * 'running')}: the live job holding a key (on the pending-key index).
   */
  public ResultQuery<Record1<Long>> keyHolder(DSLContext dsl, String queueName, String key) {
    return dsl.select(t.id)
        .from(table)
        .where(t.queue.eq(queueName))
        .and(t.uniqueKey.eq(key))
        .and(t.uniqueKey.isNotNull())
        .and(t.state.in(literal(JobState.READY), literal(JobState.RUNNING)));
  }

  /**
   * Retention of cancelled jobs, shaped as {@link JobsTable#purge}: {@code WITH c AS MATERIALIZED
   * (SELECT id FROM t WHERE queue = :q AND state = 'cancelled' AND finished_at < clock_timestamp()
   * - :age ORDER BY finished_at LIMIT :n FOR UPDATE SKIP LOCKED) DELETE FROM t AS j USING c WHERE
   * j.id = c.id}. No index is dedicated to cancelled jobs, so this scans the table; the purge sends
   * it once per call, not once per batch, unless cancelled jobs fill batches.
   */
  public Query purgeCancelled(DSLContext dsl, String queueName, Duration olderThan, int max) {
    CommonTableExpression<Record1<Long>> c =
        name("c")
            .asMaterialized(
                select(t.id)
                    .from(table)
                    .where(t.queue.eq(queueName))
                    .and(t.state.eq(literal(JobState.CANCELLED)))
                    .and(t.finishedAt.lt(PgClock.minus(olderThan)))
                    .orderBy(t.finishedAt)
                    .limit(val(max))
                    .forUpdate()
                    .skipLocked());
    Table<Record> j = table.as("j");
    return dsl.with(c)
        .delete(j)
        .using(c)
        .where(
            DSL.field(name("j", "id"), SQLDataType.BIGINT)
                .eq(DSL.field(name("c", "id"), SQLDataType.BIGINT)));
  }
}
