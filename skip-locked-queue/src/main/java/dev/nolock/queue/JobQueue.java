package dev.nolock.queue;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlWork;
import dev.nolock.queue.internal.Administration;
import dev.nolock.queue.internal.Attempts;
import dev.nolock.queue.internal.Enqueuer;
import dev.nolock.queue.internal.QueueMetrics;
import dev.nolock.queue.internal.QueueSql;
import dev.nolock.queue.internal.Upkeep;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.sql.Connection;
import java.time.Duration;
import java.util.List;
import javax.sql.DataSource;
import org.jooq.DSLContext;

/**
 * A work queue in one PostgreSQL table, claimed with {@code FOR UPDATE SKIP LOCKED}: workers never
 * wait on each other, and every claim hands out a lease and an <b>attempt token</b>.
 *
 * <p>Guarantees:
 *
 * <ul>
 *   <li><b>At-least-once delivery.</b> A committed job is claimed until some attempt completes it
 *       or it is dead-lettered. A worker that dies or pauses past its lease loses the job to the
 *       reaper, and the job runs again: handlers must tolerate a second run.
 *   <li><b>One current attempt.</b> Each claim bumps the job's attempt counter in the claiming
 *       statement. {@link #complete}, {@link #fail}, {@link #heartbeat} and {@link #release} change
 *       the job only while it is {@code running} with the caller's attempt; a stale attempt gets a
 *       {@link StaleAttempt} value and changes nothing. Exactly-once <em>effect</em> follows when
 *       the handler's writes commit with the completion ({@link #completeWith}), or carry {@code
 *       (id, attempt)} as an idempotency key to an external system.
 *   <li><b>Bounded claims.</b> {@link #claim(int) claim(n)} returns at most {@code n} jobs.
 *   <li><b>The true outcome after a lost answer.</b> A call whose outcome is unknown throws {@link
 *       BackendUnavailableException}; calling it again with the same {@link Job} answers as the
 *       first call did, per {@code (id, attempt)}; a completion in the caller's transaction refuses
 *       with {@link StaleAttempt#completedByThisAttempt()} instead, so the retried transaction
 *       rolls back. What nothing left can tell is reported unknown, never guessed: an enqueue whose
 *       COMMIT answer was lost, a completion of a purged job.
 * </ul>
 *
 * <p>Algorithm of a job's life:
 *
 * <ol>
 *   <li>Enqueue inserts a {@code ready} row in the caller's transaction and sends {@code
 *       pg_notify(channel, queue)}, which PostgreSQL delivers on commit.
 *   <li>Claim, one statement: {@code WITH c AS MATERIALIZED (SELECT id ... WHERE state = 'ready'
 *       AND run_at <= clock_timestamp() ORDER BY run_at, id LIMIT n FOR UPDATE SKIP LOCKED) UPDATE
 *       ... SET state = 'running', attempt = attempt + 1, locked_until = clock_timestamp() +
 *       lease}.
 *   <li>Finish, conditional on {@code (id, attempt, state = 'running')}: complete sets {@code
 *       done}; fail re-queues with backoff, or dead-letters after {@code maxAttempts}; release
 *       hands the job back unrun; heartbeat extends an unexpired lease.
 *   <li>The reaper returns jobs whose lease expired to {@code ready}, counting a failure.
 *   <li>Retention deletes finished jobs in batches; {@link #admin()} finds, cancels and reschedules
 *       jobs, pages through dead letters and revives them.
 * </ol>
 *
 * All expiry is judged on the database's {@code clock_timestamp()}; a {@link Job#deadline()} is
 * measured from before its claim was sent, so it ends no later than the database's lease. The work
 * is done by parts in {@code dev.nolock.queue.internal} (enqueueing, claiming and finishing,
 * upkeep, administration); this class validates and documents.
 *
 * <p>Losing a race is a value ({@link StaleAttempt}, {@link EnqueueResult.Duplicate}); a failure a
 * retry can get past (connection, timeout, pool) is a {@link BackendUnavailableException}, one it
 * would repeat (the table does not fit, a privilege is missing) an {@link IllegalStateException};
 * misuse is an {@link IllegalArgumentException}. Thread-safe.
 *
 * @param <T> the payload type
 */
public final class JobQueue<T> {

  /** Most jobs one {@link #claim} may ask for. */
  public static final int MAX_CLAIM = 10_000;

  /** Rows per INSERT statement of a batch enqueue (PostgreSQL allows 65,535 bind values). */
  static final int INSERT_CHUNK = 1_000;

  private final QueueSql sql;
  private final Enqueuer<T> enqueuer;
  private final Attempts<T> attempts;
  private final Upkeep upkeep;
  private final Administration<T> administration;
  private final QueueAdmin<T> admin;

  private JobQueue(DataSource dataSource, QueueConfig config, PayloadCodec<T> codec) {
    this.sql = new QueueSql(dataSource, config);
    this.enqueuer = new Enqueuer<>(sql, codec, INSERT_CHUNK);
    this.attempts = new Attempts<>(sql, codec, Job::new);
    this.upkeep = new Upkeep(sql);
    this.administration = new Administration<>(sql, codec);
    this.admin = new QueueAdmin<>(administration, config.queue());
  }

  /**
   * A queue on {@code dataSource} (a pool such as HikariCP; direct or through PgBouncer in
   * transaction pooling), storing payloads with {@code codec}.
   */
  public static <T> JobQueue<T> create(
      DataSource dataSource, QueueConfig config, PayloadCodec<T> codec) {
    return new JobQueue<>(dataSource, config, codec);
  }

  public QueueConfig config() {
    return sql.config();
  }

  /** The administration of this queue: find, cancel, reschedule, dead letters and their retry. */
  public QueueAdmin<T> admin() {
    return admin;
  }

  /**
   * Creates the jobs table and its indexes if they do not exist (the DDL is in the README,
   * "Schema"), in one transaction under an advisory lock on the table's name in the queue's own
   * namespace ({@code hashtextextended('nolock.queue.schema:' || :table, 0)}), so processes
   * starting together do not trip over each other. A schema-qualified table needs its schema.
   *
   * @throws dev.nolock.patterns.SchemaMismatchException when the table exists in a shape the queue
   *     cannot use (a column missing, a state CHECK without 'cancelled', ...); nothing is changed,
   *     and the message holds the DDL that fits
   * @throws IllegalStateException when PostgreSQL refuses the DDL (e.g. no CREATE privilege)
   */
  public void createTableIfMissing() {
    upkeep.createTableIfMissing();
  }

  /**
   * Enqueues {@code job} in a transaction of its own.
   *
   * @throws BackendUnavailableException when PostgreSQL failed: before the COMMIT was sent, nothing
   *     was enqueued (the message says so); once it was sent, whether the job was enqueued is
   *     unknown, and a retry may enqueue it a second time (see {@link #enqueueAll(List)})
   */
  public EnqueueResult enqueue(NewJob<T> job) {
    return enqueueAll(List.of(job)).get(0);
  }

  /**
   * Enqueues {@code job} on {@code tx}, inside the caller's open transaction, so the job exists
   * only if the caller commits; the NOTIFY fires on that commit. This call never commits nor rolls
   * back {@code tx}, also when it is a context over a plain connection ({@code DSL.using(conn)}). A
   * context in autocommit mode is refused before anything is sent ({@link
   * OwnTransaction#onCallerConnection} lists what cannot be detected). After a lost COMMIT answer,
   * a retry of the whole transaction enqueues again: {@link EnqueueResult.Duplicate} while a keyed
   * first job is pending, else a second job.
   *
   * @throws IllegalArgumentException when {@code tx}'s connection is in autocommit mode: pass the
   *     context of an open transaction, or use {@link #enqueue(NewJob)}
   * @throws BackendUnavailableException when a statement fails; roll the transaction back
   */
  public EnqueueResult enqueue(DSLContext tx, NewJob<T> job) {
    return enqueueAll(tx, List.of(job)).get(0);
  }

  /**
   * Enqueues {@code job} on {@code tx}, a JDBC connection with the caller's open transaction
   * (autoCommit false), as {@link #enqueue(DSLContext, NewJob)} does: the job commits or rolls back
   * with the caller's writes; this call never commits, rolls back nor closes {@code tx}.
   *
   * @throws IllegalArgumentException when {@code tx} is in autocommit mode
   */
  public EnqueueResult enqueue(Connection tx, NewJob<T> job) {
    return enqueueAll(tx, List.of(job)).get(0);
  }

  /**
   * Enqueues {@code jobs} together, in a transaction of their own; results in input order. A
   * failure before the COMMIT was sent enqueued nothing, and says so. A failure of the COMMIT
   * leaves it unknown: a retry enqueues again, a {@link EnqueueResult.Duplicate} while a keyed
   * first job is pending, but a second job once it finished or without a key. Give jobs that must
   * not run twice a unique key and a handler that tolerates a second run.
   *
   * @throws BackendUnavailableException when PostgreSQL failed; its message says whether the
   *     outcome is unknown or nothing was enqueued
   */
  public List<EnqueueResult> enqueueAll(List<NewJob<T>> jobs) {
    return enqueuer.enqueueAll(jobs);
  }

  /**
   * Enqueues {@code jobs} on {@code tx} (see {@link #enqueue(DSLContext, NewJob)}: the same open
   * transaction is required, and the same holds after a lost COMMIT answer) in as few statements as
   * possible ({@value #INSERT_CHUNK} rows each). Results in input order; a job whose unique key is
   * pending, or taken by an earlier job of the same batch, is a {@link EnqueueResult.Duplicate}.
   *
   * @throws IllegalArgumentException when {@code tx}'s connection is in autocommit mode
   * @throws BackendUnavailableException when a statement fails; roll the transaction back
   */
  public List<EnqueueResult> enqueueAll(DSLContext tx, List<NewJob<T>> jobs) {
    return enqueuer.enqueueAll(tx, jobs);
  }

  /** {@link #enqueueAll(DSLContext, List)} on the caller's JDBC connection {@code tx}. */
  public List<EnqueueResult> enqueueAll(Connection tx, List<NewJob<T>> jobs) {
    return enqueuer.enqueueAll(sql.onCallerConnection(tx), jobs);
  }

  /**
   * Claims up to {@code max} due jobs, oldest {@code run_at} first, skipping jobs other workers
   * hold; an empty list when none is due. Each returned job is {@code running} under a lease of
   * {@link QueueConfig#lease()} and a fresh attempt token. One statement, committed before this
   * returns. A job whose payload the codec cannot decode is failed at once, with what {@link
   * QueueConfig#errorDescriber()} makes of the codec's exception, and not returned.
   *
   * @param max 1 to {@value #MAX_CLAIM}
   */
  public List<Job<T>> claim(int max) {
    return attempts.claim(max, MAX_CLAIM);
  }

  /**
   * Completes {@code job} in a transaction of its own, if its attempt is still the running one.
   * Idempotent per attempt: a call retried after its answer was lost gets the same {@link
   * Finished}. A job purged since cannot be answered (was it this attempt that completed it?): that
   * unknown is a {@link BackendUnavailableException}, not a stale attempt.
   *
   * @return the finished job ({@link JobState#DONE}), or the {@link StaleAttempt} when the job was
   *     taken back or re-claimed meanwhile
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     {@code job} answers it, unless the job is gone (see above), which stays unknown
   */
  public Either<StaleAttempt, Finished> complete(Job<?> job) {
    return attempts.complete(job);
  }

  /**
   * Completes {@code job} on {@code tx}, the caller's transaction that also holds the job's
   * effects. Roll it back on every {@link StaleAttempt}: the attempt lost the job, or ({@link
   * StaleAttempt#completedByThisAttempt()}) it completed the job already in an earlier transaction
   * whose writes committed (the first try of this one, its COMMIT answer lost), or ({@link
   * StaleAttempt#jobGone()}) the job was purged and only your writes tell whether an earlier try
   * committed. Unlike {@link #complete(Job)}, an earlier completion is a refusal here. This call
   * joins {@code tx}'s open transaction and never commits nor rolls it back.
   *
   * @throws IllegalArgumentException when {@code tx}'s connection is in autocommit mode (no open
   *     transaction): pass the context of an open transaction
   */
  public Either<StaleAttempt, Finished> complete(DSLContext tx, Job<?> job) {
    return attempts.complete(tx, job);
  }

  /**
   * Completes {@code job} on {@code tx}, a JDBC connection with the caller's open transaction
   * (autoCommit false), as {@link #complete(DSLContext, Job)} does, with the same refusals; this
   * call never commits, rolls back nor closes {@code tx}.
   *
   * @throws IllegalArgumentException when {@code tx} is in autocommit mode
   */
  public Either<StaleAttempt, Finished> complete(Connection tx, Job<?> job) {
    return attempts.complete(sql.onCallerConnection(tx), job);
  }

  /**
   * Completes {@code job} and runs {@code writes} in one transaction, the completion first: a stale
   * attempt writes nothing and gets its {@link StaleAttempt}; otherwise the writes commit with the
   * completion (exactly-once effect in the same database). An attempt that completed already is
   * refused ({@link StaleAttempt#completedByThisAttempt()}), so a retry after a lost COMMIT answer
   * writes nothing again; a purged job too ({@link StaleAttempt#jobGone()}).
   *
   * @param writes your statements, every one through {@code tx}, the completion's transaction
   * @throws X what the writes threw (a checked exception, or a database error of their own, never
   *     turned into {@link BackendUnavailableException}), the same instance, after the rollback:
   *     nothing committed, the job still running under this attempt
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     {@code job} either commits or answers the earlier commit as above
   */
  public <R, X extends Exception> Either<StaleAttempt, R> completeWith(
      Job<?> job, SqlWork<? extends R, X> writes) throws X {
    return attempts.completeWith(job, writes);
  }

  /**
   * The batch form of {@link #complete(Job)}, in one statement and transaction, with the same
   * answer per {@code (id, attempt)}: two attempts of one job may share a batch (a process that
   * lost it to its own reaper and claimed it again), and only the running one completes. A job that
   * no longer exists cannot be answered: the rest of the batch commits, then the call throws {@link
   * BackendUnavailableException} naming the jobs whose outcome is unknown.
   *
   * @param jobs claimed jobs of this queue
   * @return one answer per job, in the order of {@code jobs}
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     jobs answers it, except for jobs that no longer exist (see above)
   */
  public List<Either<StaleAttempt, Finished>> completeAll(List<? extends Job<?>> jobs) {
    return attempts.completeAll(jobs);
  }

  /**
   * Fails this attempt of {@code job}: counts a failure, keeps {@code error}, and re-queues the job
   * at the database's clock plus a backoff from {@code [0, min(backoffMax, backoffBase *
   * 2^(failures-1))]}, or dead-letters it ({@link JobState#DEAD}) after its last allowed attempt. A
   * call retried with the same {@code job} and {@code error} after a lost answer gets the first
   * call's {@link Finished} (one failure counted) while the job still shows that fail.
   *
   * @param error stored as given in {@code last_error}, cut at 8000 characters: keep payload data
   *     out of it, as the worker pool does with {@link QueueConfig#errorDescriber()}
   * @throws BackendUnavailableException when the outcome is unknown; calling again answers it
   */
  public Either<StaleAttempt, Finished> fail(Job<?> job, String error) {
    return attempts.fail(job, error);
  }

  /**
   * Extends the lease of {@code job} to the database's clock plus {@link QueueConfig#lease()}, if
   * this attempt still runs <em>and its lease has not expired</em>: a compare-and-swap on the
   * attempt token, never a blind bump. The worker pool heartbeats its jobs by itself.
   *
   * @return the job with its new {@link Job#lockedUntil()} and {@link Job#deadline()}, or the
   *     {@link StaleAttempt}: stop working on it
   */
  public Either<StaleAttempt, Job<T>> heartbeat(Job<T> job) {
    return attempts
        .heartbeat(job)
        .map(lease -> job.withLease(lease.lockedUntil(), lease.deadline()));
  }

  /** Extends many leases in one statement that never waits on a row lock; per job, in order. */
  List<Option<Job<T>>> heartbeatAll(List<Job<T>> held) {
    return io.vavr.collection.List.ofAll(held)
        .zipWith(
            attempts.heartbeatAll(held),
            (job, lease) -> lease.map(l -> job.withLease(l.lockedUntil(), l.deadline())))
        .asJava();
  }

  /**
   * Hands {@code job} back unrun: {@code ready} at its old place, no failure counted (graceful
   * shutdown uses this); the next claim gets a higher token. A call retried after a lost answer
   * gets the first call's {@link Finished} while the job still shows that release.
   *
   * @throws BackendUnavailableException when the outcome is unknown; calling again answers it
   */
  public Either<StaleAttempt, Finished> release(Job<?> job) {
    return attempts.release(job);
  }

  /**
   * Takes back every job of this queue whose lease has expired on the database's clock: each counts
   * a failed attempt ("the lease of attempt n expired ...") and is {@code ready} again at its old
   * {@code run_at}, or dead-lettered after its last allowed attempt. Safe to run from every worker
   * at once (it skips rows others hold); the pool runs it every {@link
   * WorkerConfig#reapInterval()}.
   */
  public ReapResult reapExpired() {
    return upkeep.reapExpired();
  }

  /**
   * Deletes this queue's jobs that completed, or were cancelled, more than {@code olderThan} ago
   * (database clock), in batches of {@link QueueConfig#purgeBatchSize()}, each its own short
   * transaction. It locks only finished rows and skips rows someone else holds, so claims and
   * finishes never wait for it. Dead jobs are kept: retry or delete them yourself.
   */
  public PurgeResult purgeFinished(Duration olderThan) {
    return upkeep.purgeFinished(olderThan);
  }

  /**
   * Runs {@code VACUUM (SKIP_LOCKED)} on the jobs table, on a pool connection switched to
   * autocommit for it; returns at once if another VACUUM holds the table. Claims walk past every
   * ready-index entry a claimed job left until a vacuum removes it (see the README, "Bloat"): call
   * this, or let the pool ({@link WorkerConfig.Builder#vacuumInterval}), where autovacuum is off or
   * lags. Needs the table's owner (from PostgreSQL 16, the MAINTAIN privilege is enough).
   *
   * @throws BackendUnavailableException when PostgreSQL fails it (connection, timeout)
   */
  public void vacuum() {
    upkeep.vacuum();
  }

  /**
   * The due backlog: ready jobs whose {@code run_at} has come (counted up to {@link
   * QueueConfig#readyCountCap()}) and the oldest one's age, in one indexed query.
   */
  public ReadyStats readyStats() {
    return upkeep.readyStats();
  }

  /** Renders the statements a worker uses before its first claim (see {@link Attempts#warmUp}). */
  void warmUp() {
    attempts.warmUp();
  }

  QueueMetrics metrics() {
    return sql.metrics();
  }

  DataSource dataSource() {
    return sql.dataSource();
  }

  @Override
  public String toString() {
    return "JobQueue[" + sql.config() + "]";
  }
}
