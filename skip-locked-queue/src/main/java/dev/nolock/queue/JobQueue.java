package dev.nolock.queue;

import static dev.nolock.queue.internal.PgFunctions.pgNotify;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.internal.JobsTable;
import dev.nolock.queue.internal.QueueMetrics;
import dev.nolock.queue.internal.QueueMetrics.Operation;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.SQLDialect;
import org.jooq.conf.Settings;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 *       statement, so attempt numbers strictly increase. {@link #complete}, {@link #fail}, {@link
 *       #heartbeat} and {@link #release} change the job only while it is {@code running} with the
 *       caller's attempt; a stale attempt gets a {@link StaleAttempt} value and changes nothing.
 *       Exactly-once <em>effect</em> follows when the handler's own writes commit in the same
 *       transaction as the completion ({@link #completeWith}), or carry {@code (id, attempt)} as an
 *       idempotency key to an external system.
 *   <li><b>Bounded claims.</b> {@link #claim(int) claim(n)} returns at most {@code n} jobs, from
 *       one statement with a MATERIALIZED CTE, skipping jobs other workers have locked.
 *   <li><b>The true outcome after a lost answer.</b> A call whose outcome is unknown throws {@link
 *       BackendUnavailableException}; calling it again with the same {@link Job} tells what
 *       happened. {@link #complete(Job)}, {@link #completeAll}, {@link #fail} and {@link #release}
 *       recognise their own earlier finish and answer as the first call did. A completion in the
 *       caller's transaction ({@link #complete(DSLContext, Job)}, {@link #completeWith}) refuses
 *       instead, with {@link StaleAttempt#completedByThisAttempt()}, so that a retried transaction
 *       rolls back rather than commit its writes twice. Every answer is per {@code (id, attempt)}.
 *       Some outcomes stay unknown, and are reported so, never guessed: an enqueue whose COMMIT
 *       answer was lost (a retry may enqueue the job again), a completion of a job that retention
 *       has deleted since, and a {@link #retryDead} whose revival may have landed.
 * </ul>
 *
 * <p>Algorithm of a job's life:
 *
 * <ol>
 *   <li>Enqueue inserts a {@code ready} row in the caller's transaction (so the job exists only if
 *       the business write committed) and sends {@code pg_notify(channel, queue)}, which PostgreSQL
 *       delivers on commit.
 *   <li>Claim: {@code WITH c AS MATERIALIZED (SELECT id ... WHERE state = 'ready' AND run_at <=
 *       clock_timestamp() ORDER BY run_at, id LIMIT n FOR UPDATE SKIP LOCKED) UPDATE ... SET state
 *       = 'running', attempt = attempt + 1, locked_until = clock_timestamp() + lease FROM c ...
 *       RETURNING ...}.
 *   <li>Finish, conditional on {@code (id, attempt, state = 'running')}: complete sets {@code
 *       done}; fail counts a failure and re-queues with exponential backoff and full jitter, or
 *       dead-letters with the last error after {@code maxAttempts}; release hands the job back
 *       unrun; heartbeat extends an unexpired lease.
 *   <li>The reaper returns jobs whose lease expired ({@code locked_until < clock_timestamp()}) to
 *       {@code ready}, counting the lost attempt as a failure (a job that kills its worker is
 *       dead-lettered after {@code maxAttempts} instead of looping forever).
 *   <li>Retention deletes finished jobs in batches; {@link #retryDead} revives a dead job.
 * </ol>
 *
 * All expiry is judged on the database's {@code clock_timestamp()}; the {@link Job#deadline()} a
 * worker sees is measured from before its claim was sent, so it ends no later than the database's
 * lease.
 *
 * <p>Losing a race is a value ({@link StaleAttempt}, {@link EnqueueResult.Duplicate}); a failure of
 * PostgreSQL or the pool is a {@link BackendUnavailableException} (retry later); misuse is an
 * {@link IllegalArgumentException}. Thread-safe.
 *
 * @param <T> the payload type
 */
public final class JobQueue<T> {

  /** Most jobs one {@link #claim} may ask for. */
  public static final int MAX_CLAIM = 10_000;

  /** Rows per INSERT statement of a batch enqueue (PostgreSQL allows 65,535 bind values). */
  static final int INSERT_CHUNK = 1_000;

  private static final Logger LOG = LoggerFactory.getLogger(JobQueue.class);
  private static final String PG_UNIQUE_VIOLATION = "23505";

  private final DataSource dataSource;
  private final QueueConfig config;
  private final PayloadCodec<T> codec;
  private final DSLContext dsl;
  private final JobsTable jobs;
  private final String queue;
  private final QueueMetrics metrics;
  private final ReadySampler sampler;

  private JobQueue(DataSource dataSource, QueueConfig config, PayloadCodec<T> codec) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.config = Objects.requireNonNull(config, "config");
    this.codec = Objects.requireNonNull(codec, "codec");
    this.queue = config.queue();
    Settings settings =
        new Settings().withQueryTimeout(Math.toIntExact(config.queryTimeout().toSeconds()));
    this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES, settings);
    this.jobs = new JobsTable(SqlNames.requireSqlIdentifier("jobs table", config.table()));
    this.metrics = new QueueMetrics(config.registry().orElse(null), queue);
    this.sampler = new ReadySampler();
    metrics.registerGauges(
        sampler,
        s -> s.get().map(r -> (double) r.readyJobs()).orElse(Double.NaN),
        s ->
            s.get()
                .map(r -> r.oldestReadyAge().map(a -> a.toNanos() / 1e9).orElse(0.0))
                .orElse(Double.NaN));
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
    return config;
  }

  /**
   * Creates the jobs table and its indexes if they do not exist (the DDL is in the README,
   * "Schema"). Runs in one transaction under an advisory lock on the table's name, so processes
   * starting together do not trip over each other. A schema-qualified table needs its schema.
   *
   * @throws BackendUnavailableException when the DDL fails, e.g. without the CREATE privilege
   */
  public void createSchemaIfMissing() {
    translate(
        () -> "creating the jobs table (the user needs CREATE on its schema)",
        () ->
            dsl.transactionResult(
                cfg -> {
                  DSLContext tx = cfg.dsl();
                  tx.select(
                          DSL.function(
                              DSL.unquotedName("pg_advisory_xact_lock"),
                              Object.class,
                              DSL.function(
                                  DSL.unquotedName("hashtextextended"),
                                  Long.class,
                                  DSL.val(config.table()),
                                  DSL.inline(0L))))
                      .execute();
                  for (Query ddl : jobs.createSchema(tx)) {
                    ddl.execute();
                  }
                  return null;
                }));
  }

  // -----------------------------------------------------------------------------------------------
  // Enqueue

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
   * Enqueues {@code job} on {@code tx}, inside the caller's transaction, so the job exists only if
   * the caller commits. The NOTIFY goes out on the same connection and fires on commit.
   *
   * <p>{@code tx} must be in an open transaction: a jOOQ {@code transaction} context, or a context
   * on a connection with autocommit off. A context whose connection is in autocommit mode (a {@code
   * DSL.using(pool)} outside {@code transaction(...)}) is refused before anything is sent: the job
   * would commit on its own, apart from the caller's writes. A context in no transaction on a pool
   * with autocommit off cannot be told from an open transaction; {@link
   * OwnTransaction#onCallerConnection} lists what cannot be detected.
   *
   * <p>When the answer to the caller's COMMIT is lost, whether the job was enqueued is unknown; a
   * retry of the whole transaction enqueues it again: a {@link EnqueueResult.Duplicate} while the
   * first job is still pending (with a unique key), but a second job once the first finished or
   * without a key.
   *
   * @throws IllegalArgumentException when {@code tx}'s connection is in autocommit mode: pass the
   *     context of an open transaction, or use {@link #enqueue(NewJob)}
   * @throws BackendUnavailableException when a statement fails; roll the transaction back
   */
  public EnqueueResult enqueue(DSLContext tx, NewJob<T> job) {
    return enqueueAll(tx, List.of(job)).get(0);
  }

  /**
   * Enqueues {@code jobs} together, in a transaction of their own; results in input order.
   *
   * <p>After a failure the outcome is definite only until the COMMIT is sent. A failure before it
   * (a refused statement, a lost connection) rolled everything back: nothing was enqueued, and the
   * exception says so. A failure of the COMMIT itself, typically its answer lost with the
   * connection, leaves it unknown whether the jobs were enqueued. A retry then enqueues them again:
   * a job with a unique key is answered {@link EnqueueResult.Duplicate} while the first is still
   * pending, but once that one finished the retry adds a second job, which runs again; a job
   * without a key always does. Give jobs that must not run twice a unique key and a handler that
   * tolerates a second run.
   *
   * @throws BackendUnavailableException when PostgreSQL failed; its message says whether the
   *     outcome is unknown or nothing was enqueued
   */
  public List<EnqueueResult> enqueueAll(List<NewJob<T>> jobs) {
    // Set once the inserts ran and jOOQ is about to COMMIT: from then on a failure leaves the
    // outcome unknown, before it nothing can have committed.
    boolean[] committing = new boolean[1];
    return translate(
        () ->
            committing[0]
                ? "committing "
                    + jobs.size()
                    + " enqueued job(s): whether they were enqueued is unknown (the COMMIT was"
                    + " sent, its answer did not arrive). A retry enqueues them again: a job with a"
                    + " unique key is a Duplicate while the first is still pending, but once that"
                    + " one finished, or without a key, it becomes a second job that runs again"
                : "enqueueing " + jobs.size() + " job(s); nothing was enqueued",
        () ->
            dsl.transactionResult(
                cfg -> {
                  List<EnqueueResult> results = insertAndNotify(cfg.dsl(), jobs);
                  committing[0] = true;
                  return results;
                }));
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
    Objects.requireNonNull(tx, "tx");
    return translate(
        () -> "enqueueing " + jobs.size() + " job(s) in the caller's transaction",
        () -> OwnTransaction.onCallerConnection(tx, dsl, on -> insertAndNotify(on, jobs)));
  }

  private List<EnqueueResult> insertAndNotify(DSLContext on, List<NewJob<T>> newJobs) {
    Objects.requireNonNull(newJobs, "jobs");
    EnqueueResult[] results = new EnqueueResult[newJobs.size()];
    // A key repeated within the batch is a duplicate of its first occurrence and is not sent, so
    // each key appears at most once per statement and the returned rows match by key.
    List<Integer> toSend = new ArrayList<>(newJobs.size());
    Set<String> keys = new HashSet<>();
    for (int i = 0; i < newJobs.size(); i++) {
      NewJob<T> job = Objects.requireNonNull(newJobs.get(i), "a job in the list is null");
      String key = job.uniqueKey().orElse(null);
      if (key != null && !keys.add(key)) {
        results[i] = new EnqueueResult.Duplicate(key);
      } else {
        toSend.add(i);
      }
    }
    boolean dueNow = false;
    int inserted = 0;
    for (int from = 0; from < toSend.size(); from += INSERT_CHUNK) {
      List<Integer> chunk = toSend.subList(from, Math.min(toSend.size(), from + INSERT_CHUNK));
      List<JobsTable.NewRow> rows = new ArrayList<>(chunk.size());
      for (int i : chunk) {
        NewJob<T> job = newJobs.get(i);
        rows.add(
            new JobsTable.NewRow(
                codec.encode(job.payload()),
                job.uniqueKey().orElse(null),
                job.maxAttempts().orElse(config.maxAttempts()),
                job.runAt().map(at -> at.atOffset(ZoneOffset.UTC)).orElse(null),
                job.delay()));
        dueNow |= job.runAt().map(at -> !at.isAfter(Instant.now())).orElse(job.delay().isZero());
      }
      Map<String, Long> keyed = new HashMap<>();
      List<Long> unkeyed = new ArrayList<>();
      for (Record2<Long, String> r : jobs.insert(on, queue, rows).fetch()) {
        if (r.value2() == null) {
          unkeyed.add(r.value1());
        } else {
          keyed.put(r.value2(), r.value1());
        }
      }
      // Identity values are drawn in VALUES order, so the sorted ids of the rows without a key
      // follow their input order (those rows cannot conflict, so none is missing).
      Collections.sort(unkeyed);
      Iterator<Long> nextUnkeyed = unkeyed.iterator();
      for (int i : chunk) {
        String key = newJobs.get(i).uniqueKey().orElse(null);
        if (key == null) {
          if (!nextUnkeyed.hasNext()) {
            throw new IllegalStateException(
                "A job without a unique key was not inserted into "
                    + jobs
                    + ". This is a bug;"
                    + " please report it.");
          }
          results[i] = new EnqueueResult.Enqueued(nextUnkeyed.next());
        } else {
          Long id = keyed.get(key);
          results[i] =
              id != null ? new EnqueueResult.Enqueued(id) : new EnqueueResult.Duplicate(key);
        }
      }
      inserted += keyed.size() + unkeyed.size();
    }
    if (config.notifyOnEnqueue() && dueNow && inserted > 0) {
      on.select(pgNotify(config.channel(), queue)).execute();
    }
    metrics.enqueued(inserted, newJobs.size() - inserted);
    return List.of(results);
  }

  // -----------------------------------------------------------------------------------------------
  // Claim

  /**
   * Claims up to {@code max} due jobs, oldest {@code run_at} first, skipping jobs other workers
   * hold; an empty list when none is due. Each returned job is {@code running} under a lease of
   * {@link QueueConfig#lease()} and a fresh attempt token. One statement, committed before this
   * returns.
   *
   * <p>A job whose payload the codec cannot decode is failed at once (it retries with backoff and
   * is dead-lettered with the decode error after its attempts) and not returned.
   *
   * @param max 1 to {@value #MAX_CLAIM}
   */
  public List<Job<T>> claim(int max) {
    if (max < 1 || max > MAX_CLAIM) {
      throw new IllegalArgumentException(
          "claim(max) takes 1 to " + MAX_CLAIM + " jobs, got " + max);
    }
    // The lease is counted from just before the statement goes out, after the pool handed over a
    // connection: waiting for the pool does not eat into it, the round trip does.
    long[] sentAt = new long[1];
    long started = System.nanoTime();
    List<Record> rows =
        translate(
            () ->
                "claiming up to "
                    + max
                    + " job(s). Jobs claimed by a lost response stay"
                    + " running until their lease expires and the reaper re-queues them",
            () ->
                OwnTransaction.run(
                    dsl,
                    on -> {
                      sentAt[0] = config.clock().nanoTime();
                      return jobs.claim(on, queue, max, config.lease()).fetch();
                    }));
    Duration latency = Duration.ofNanos(System.nanoTime() - started);
    if (rows.size() > max) {
      throw new IllegalStateException(
          "A claim of at most "
              + max
              + " returned "
              + rows.size()
              + " jobs. This is a bug;"
              + " please report it.");
    }
    Deadline deadline = Deadline.forHolder(config.clock(), sentAt[0], config.lease());
    List<Job<T>> claimed = new ArrayList<>(rows.size());
    for (Record r : rows) {
      long id = r.get(0, Long.class);
      long attempt = r.get(1, Long.class);
      T payload;
      try {
        payload = codec.decode(r.get(2, byte[].class));
      } catch (RuntimeException e) {
        LOG.warn(
            "Job {} of queue \"{}\": the codec could not decode its payload; failing the"
                + " attempt",
            id,
            queue,
            e);
        try {
          failAttempt(
              id, attempt, r.get(7, Integer.class), "the payload could not be decoded: " + e);
        } catch (DataAccessException failed) {
          LOG.warn(
              "Job {} of queue \"{}\": failing the undecodable attempt failed too; the"
                  + " reaper takes it back when its lease expires",
              id,
              queue,
              failed);
        }
        continue;
      }
      claimed.add(
          new Job<>(
              id,
              queue,
              attempt,
              payload,
              r.get(3, String.class),
              r.get(4, OffsetDateTime.class).toInstant(),
              r.get(5, OffsetDateTime.class).toInstant(),
              r.get(6, OffsetDateTime.class).toInstant(),
              r.get(7, Integer.class),
              r.get(8, Integer.class),
              deadline));
    }
    claimed.sort(Comparator.comparing(Job<T>::runAt).thenComparingLong(Job::id));
    metrics.claimed(rows.size(), latency);
    return claimed;
  }

  // -----------------------------------------------------------------------------------------------
  // Finish

  /**
   * Completes {@code job} in a transaction of its own, if its attempt is still the running one.
   * Idempotent for one attempt: completing an attempt that already completed returns the same
   * {@link Finished} again, so a call retried after its answer was lost reports the completion it
   * made.
   *
   * <p>One answer cannot be given: when the job no longer exists (retention purged it after some
   * attempt completed it), this call cannot tell whether this attempt completed it in an earlier
   * call whose answer was lost, and throws {@link BackendUnavailableException} for that unknown
   * instead of calling the attempt stale.
   *
   * @return the finished job ({@link JobState#DONE}), or the {@link StaleAttempt} when the job was
   *     taken back or re-claimed meanwhile
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     {@code job} answers it, unless the job is gone (see above), which stays unknown
   */
  public Either<StaleAttempt, Finished> complete(Job<?> job) {
    Objects.requireNonNull(job, "job");
    requireOwn(job);
    return translate(
        () ->
            "completing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it completed is unknown: complete it again to learn the outcome, or"
                + " let it run again (at-least-once)",
        () -> {
          Either<StaleAttempt, Finished> answer =
              OwnTransaction.run(dsl, on -> completeOn(on, job, EarlierCompletion.REPLAY));
          if (answer.isLeft() && answer.getLeft().jobGone()) {
            throw goneUnknown(List.of(job), 0);
          }
          return answer;
        });
  }

  /**
   * Completes {@code job} on {@code tx}, typically the caller's transaction that also holds the
   * job's effects. Roll that transaction back on every {@link StaleAttempt}: either its attempt
   * lost the job, or ({@link StaleAttempt#completedByThisAttempt()}) this attempt completed the job
   * already, in an earlier transaction whose writes committed, typically the first try of this same
   * transaction whose COMMIT answer was lost; committing again would write the effects twice.
   * Unlike {@link #complete(Job)}, an earlier completion by the same attempt is therefore a refusal
   * here, not a {@link Finished}. A job that no longer exists ({@link StaleAttempt#jobGone()}:
   * purged after some attempt completed it) is refused too: whether an earlier try of this
   * transaction committed is then unknown, and only your own writes can tell.
   *
   * @throws IllegalArgumentException when {@code tx}'s connection is in autocommit mode (no open
   *     transaction): pass the context of an open transaction
   */
  public Either<StaleAttempt, Finished> complete(DSLContext tx, Job<?> job) {
    Objects.requireNonNull(tx, "tx");
    Objects.requireNonNull(job, "job");
    requireOwn(job);
    return translate(
        () ->
            "completing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + " in the caller's transaction",
        () ->
            OwnTransaction.onCallerConnection(
                tx, dsl, on -> completeOn(on, job, EarlierCompletion.REFUSAL)));
  }

  /**
   * Completes {@code job} and runs {@code writes} in one transaction, the completion first: when
   * the attempt is stale nothing is written and the {@link StaleAttempt} is returned; otherwise the
   * writes run on the transaction's context and commit together with the completion. The row lock
   * the completion takes orders this attempt against anything else touching the job. This is how a
   * handler gets an exactly-once effect in the same database.
   *
   * <p>An attempt that already completed is refused ({@link StaleAttempt#completedByThisAttempt()}
   * is true): its writes committed then, so a call retried after a lost COMMIT answer writes
   * nothing again. A job that no longer exists is refused as well ({@link StaleAttempt#jobGone()}):
   * whether an earlier call's writes committed is then unknown. An exception from {@code writes}
   * rolls everything back and propagates unchanged; the job stays running under this attempt, to be
   * failed, retried or reaped.
   *
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     {@code job} either commits or answers the earlier commit as above
   */
  public <R> Either<StaleAttempt, R> completeWith(
      Job<?> job, Function<DSLContext, ? extends R> writes) {
    Objects.requireNonNull(job, "job");
    Objects.requireNonNull(writes, "writes");
    requireOwn(job);
    Either<StaleAttempt, R> result;
    try {
      result =
          translate(
              () ->
                  "completing job "
                      + job.id()
                      + " attempt "
                      + job.attempt()
                      + " with its"
                      + " writes; whether they committed is unknown",
              () ->
                  dsl.transactionResult(
                      cfg -> {
                        DSLContext tx = cfg.dsl();
                        if (jobs.complete(tx, queue, job.id(), job.attempt())
                            .fetchOptional()
                            .isEmpty()) {
                          return Either.<StaleAttempt, R>left(staleAttempt(tx, job));
                        }
                        try {
                          return Either.<StaleAttempt, R>right(writes.apply(tx));
                        } catch (RuntimeException e) {
                          throw new CallerWritesFailed(e);
                        }
                      }));
    } catch (CallerWritesFailed e) {
      throw e.getCause();
    }
    if (result.isLeft()) {
      metrics.stale(Operation.COMPLETE);
    } else {
      metrics.completed();
    }
    return result;
  }

  /**
   * Completes every job of {@code jobs} whose attempt is still the running one, in one transaction
   * and one statement: the batch form of {@link #complete(Job)}, with the same answer for each
   * attempt (an attempt that completed before gets its {@link Finished} again; a stale one its
   * {@link StaleAttempt}, and its row is left alone). Answers are per {@code (id, attempt)}: two
   * attempts of one job may share a batch (a process that lost the job to its own reaper and
   * claimed it again), and only the running one completes. {@link WorkerPool} sends the completions
   * of jobs that finish together this way.
   *
   * <p>A job of the batch that no longer exists (retention purged it after some attempt completed
   * it) cannot be answered, as in {@link #complete(Job)}: the rest of the batch is completed and
   * committed all the same, and then the call throws {@link BackendUnavailableException} naming the
   * jobs whose outcome is unknown; calling again without them answers the others.
   *
   * @param jobs claimed jobs of this queue
   * @return one answer per job, in the order of {@code jobs}
   * @throws BackendUnavailableException when the outcome is unknown; calling again with the same
   *     jobs answers it, except for jobs that no longer exist (see above)
   */
  public List<Either<StaleAttempt, Finished>> completeAll(List<? extends Job<?>> jobs) {
    Objects.requireNonNull(jobs, "jobs");
    List<long[]> pairs = new ArrayList<>(jobs.size());
    for (Job<?> job : jobs) {
      Objects.requireNonNull(job, "a job in jobs");
      requireOwn(job);
      pairs.add(new long[] {job.id(), job.attempt()});
    }
    if (jobs.isEmpty()) {
      return List.of();
    }
    List<Either<StaleAttempt, Finished>> answers =
        translate(
            () ->
                "completing "
                    + jobs.size()
                    + " job(s); whether they completed is unknown: complete them again to learn the"
                    + " outcome, or let them run again (at-least-once)",
            () ->
                OwnTransaction.run(
                    dsl,
                    on -> {
                      Map<Attempt, OffsetDateTime> done = new HashMap<>();
                      this.jobs
                          .completeAll(on, queue, pairs)
                          .forEach(
                              row ->
                                  done.put(new Attempt(row.value1(), row.value2()), row.value3()));
                      List<Either<StaleAttempt, Finished>> each = new ArrayList<>(jobs.size());
                      for (Job<?> job : jobs) {
                        // remove: the same attempt listed twice completes once; the second
                        // answer is the replay of the first
                        OffsetDateTime runAt = done.remove(Attempt.of(job));
                        if (runAt != null) {
                          metrics.completed();
                          each.add(Either.right(finishedNow(job, runAt)));
                        } else {
                          each.add(notCompletedNow(on, job, EarlierCompletion.REPLAY));
                        }
                      }
                      return each;
                    }));
    List<Job<?>> gone = new ArrayList<>();
    for (int i = 0; i < jobs.size(); i++) {
      if (answers.get(i).isLeft() && answers.get(i).getLeft().jobGone()) {
        gone.add(jobs.get(i));
      }
    }
    if (!gone.isEmpty()) {
      throw goneUnknown(gone, jobs.size() - gone.size());
    }
    return answers;
  }

  /**
   * "Unknown" for completions of jobs that no longer exist: retention deletes only completed jobs,
   * and the row that could have said which attempt completed it is gone.
   */
  private BackendUnavailableException goneUnknown(List<Job<?>> gone, int othersAnswered) {
    StringBuilder which = new StringBuilder();
    for (Job<?> job : gone) {
      which.append(which.length() == 0 ? "" : ", ").append(job.id()).append(" attempt ");
      which.append(job.attempt());
    }
    return new BackendUnavailableException(
        "Completing job(s) "
            + which
            + " of queue \""
            + queue
            + "\": the job no longer exists (retention purged it after an attempt completed it, or"
            + " it was deleted), so whether this attempt completed it, in an earlier call whose"
            + " answer was lost, is unknown. This call changed nothing for it; do not expect it"
            + " to run again."
            + (othersAnswered > 0
                ? " The other "
                    + othersAnswered
                    + " job(s) of the batch were completed or answered, and committed: call"
                    + " completeAll again without the missing job(s) for their answers."
                : ""),
        null);
  }

  /** One attempt of one job: what every answer of the queue is keyed by. */
  private record Attempt(long id, long attempt) {
    static Attempt of(Job<?> job) {
      return new Attempt(job.id(), job.attempt());
    }
  }

  /** How a completion answers when the same attempt completed the job before. */
  private enum EarlierCompletion {
    /** The same {@link Finished} again: the caller's retry of its own committed completion. */
    REPLAY,
    /**
     * A {@link StaleAttempt}: the completion joins the caller's transaction, whose other writes
     * must not commit a second time.
     */
    REFUSAL
  }

  private Either<StaleAttempt, Finished> completeOn(
      DSLContext on, Job<?> job, EarlierCompletion earlier) {
    Optional<OffsetDateTime> runAt =
        jobs.complete(on, queue, job.id(), job.attempt()).fetchOptional(jobs.runAt);
    if (runAt.isPresent()) {
      metrics.completed();
      return Either.right(finishedNow(job, runAt.get()));
    }
    return notCompletedNow(on, job, earlier);
  }

  private static Finished finishedNow(Job<?> job, OffsetDateTime runAt) {
    return new Finished(job.id(), job.attempt(), JobState.DONE, runAt.toInstant());
  }

  /** The answer for an attempt whose completion changed no row: done before, or stale. */
  private Either<StaleAttempt, Finished> notCompletedNow(
      DSLContext on, Job<?> job, EarlierCompletion earlier) {
    Optional<Record3<String, Long, OffsetDateTime>> now =
        jobs.current(on, queue, job.id()).fetchOptional();
    StaleAttempt stale = toStale(job.id(), job.attempt(), now);
    if (stale.completedByThisAttempt() && earlier == EarlierCompletion.REPLAY) {
      // A retried call, or the handler completed in its own transaction: the same answer again.
      return Either.right(
          new Finished(job.id(), job.attempt(), JobState.DONE, now.get().value3().toInstant()));
    }
    if (!(stale.jobGone() && earlier == EarlierCompletion.REPLAY)) {
      // A gone job is no refusal where an earlier completion is replayed: the caller reports it as
      // unknown, which is not counted as stale.
      metrics.stale(Operation.COMPLETE);
    }
    return Either.left(stale);
  }

  /**
   * Fails this attempt of {@code job}: counts a failure and keeps {@code error} as the job's last
   * error; with attempts left the job is ready again at the database's clock plus a backoff drawn
   * from {@code [0, min(backoffMax, backoffBase * 2^(failures-1))]}; after the last allowed attempt
   * it is dead-lettered ({@link JobState#DEAD}) and keeps the error until {@link #retryDead}.
   *
   * <p>A call retried with the same {@code job} and {@code error} after its answer was lost gets
   * the {@link Finished} the first call made (one failure counted), as long as the job still shows
   * that fail: not re-claimed, and not revived by {@link #retryDead} meanwhile.
   *
   * @param error what went wrong, e.g. an exception's stack trace; cut at 8000 characters
   * @throws BackendUnavailableException when the outcome is unknown; calling again answers it
   */
  public Either<StaleAttempt, Finished> fail(Job<?> job, String error) {
    Objects.requireNonNull(job, "job");
    requireOwn(job);
    return translate(
        () ->
            "failing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it failed is unknown: fail it again to learn the outcome, or let the"
                + " lease expire and the reaper count the failure",
        () -> failAttempt(job.id(), job.attempt(), job.failures(), error));
  }

  private Either<StaleAttempt, Finished> failAttempt(
      long id, long attempt, int failuresBefore, String error) {
    Duration backoff = config.backoff().backoff(failuresBefore + 1, ThreadLocalRandom.current());
    return OwnTransaction.run(
        dsl,
        on -> {
          Optional<Record2<String, OffsetDateTime>> row =
              jobs.fail(on, queue, id, attempt, error, backoff).fetchOptional();
          if (row.isPresent()) {
            JobState state = JobState.fromSql(row.get().value1());
            metrics.failed(state == JobState.DEAD);
            return Either.right(new Finished(id, attempt, state, row.get().value2().toInstant()));
          }
          // Not running at this attempt: this very fail may have ended it already (a retry
          // after a lost answer), which is answered as the first call was.
          Optional<Record2<String, OffsetDateTime>> failedBefore =
              jobs.failedBy(on, queue, id, attempt, failuresBefore, error).fetchOptional();
          if (failedBefore.isPresent()) {
            return Either.right(
                new Finished(
                    id,
                    attempt,
                    JobState.fromSql(failedBefore.get().value1()),
                    failedBefore.get().value2().toInstant()));
          }
          metrics.stale(Operation.FAIL);
          return Either.left(toStale(id, attempt, jobs.current(on, queue, id).fetchOptional()));
        });
  }

  /**
   * Extends the lease of {@code job} to the database's clock plus {@link QueueConfig#lease()}, if
   * this attempt is still the running one <em>and its lease has not expired</em>: a
   * compare-and-swap on the attempt token, never a blind bump. The worker pool heartbeats its jobs
   * by itself.
   *
   * @return the job with its new {@link Job#lockedUntil()} and {@link Job#deadline()}, or the
   *     {@link StaleAttempt}: stop working on it
   */
  public Either<StaleAttempt, Job<T>> heartbeat(Job<T> job) {
    Objects.requireNonNull(job, "job");
    requireOwn(job);
    long[] sentAt = new long[1];
    Optional<OffsetDateTime> until =
        translate(
            () ->
                "extending the lease of job "
                    + job.id()
                    + " attempt "
                    + job.attempt()
                    + "; treat the lease as ending at its deadline unless a later heartbeat"
                    + " succeeds",
            () ->
                OwnTransaction.run(
                    dsl,
                    on -> {
                      sentAt[0] = config.clock().nanoTime();
                      return jobs.heartbeat(on, queue, job.id(), job.attempt(), config.lease())
                          .fetchOptional(jobs.lockedUntil);
                    }));
    if (until.isPresent()) {
      metrics.coordination().renewed();
      return Either.right(
          job.withLease(
              until.get().toInstant(),
              Deadline.forHolder(config.clock(), sentAt[0], config.lease())));
    }
    metrics.coordination().renewalFailed();
    metrics.stale(Operation.HEARTBEAT);
    return Either.left(
        translate(
            () -> "reading job " + job.id() + " after a refused heartbeat",
            () -> OwnTransaction.run(dsl, on -> staleAttempt(on, job))));
  }

  /**
   * Extends the leases of many held jobs in one statement that never waits for a row lock (see
   * {@link JobsTable#heartbeatWithoutWaiting}); one answer per job of {@code held}, in its order:
   * the job with its extended lease, or empty when it is stale, expired, or was locked by someone
   * at that instant (most often this worker finishing it). Answers are per {@code (id, attempt)}: a
   * pool may hold two attempts of one job, and only the running one is extended. Counts nothing:
   * the caller knows which misses matter.
   */
  List<Option<Job<T>>> heartbeatAll(List<Job<T>> held) {
    if (held.isEmpty()) {
      return List.of();
    }
    List<long[]> pairs = new ArrayList<>(held.size());
    held.forEach(job -> pairs.add(new long[] {job.id(), job.attempt()}));
    long[] sentAt = new long[1];
    List<Record3<Long, Long, OffsetDateTime>> rows =
        translate(
            () ->
                "extending the lease of "
                    + held.size()
                    + " job(s); treat each lease as ending"
                    + " at its deadline unless a later heartbeat succeeds",
            () ->
                OwnTransaction.run(
                    dsl,
                    on -> {
                      sentAt[0] = config.clock().nanoTime();
                      return jobs.heartbeatWithoutWaiting(on, queue, pairs, config.lease()).fetch();
                    }));
    Deadline deadline = Deadline.forHolder(config.clock(), sentAt[0], config.lease());
    Map<Attempt, OffsetDateTime> until = new HashMap<>();
    rows.forEach(row -> until.put(new Attempt(row.value1(), row.value2()), row.value3()));
    List<Option<Job<T>>> answers = new ArrayList<>(held.size());
    for (Job<T> job : held) {
      answers.add(
          Option.of(until.get(Attempt.of(job)))
              .map(lockedUntil -> job.withLease(lockedUntil.toInstant(), deadline)));
    }
    return answers;
  }

  /**
   * Hands {@code job} back unrun: {@code ready} again at its old place in the queue, without
   * counting a failure (graceful shutdown uses this). The attempt token is spent; the next claim
   * gets a higher one.
   *
   * <p>A call retried with the same {@code job} after its answer was lost gets the {@link Finished}
   * the first call made, as long as the job still shows that release (not re-claimed meanwhile).
   *
   * @throws BackendUnavailableException when the outcome is unknown; calling again answers it
   */
  public Either<StaleAttempt, Finished> release(Job<?> job) {
    Objects.requireNonNull(job, "job");
    requireOwn(job);
    return translate(
        () ->
            "releasing job "
                + job.id()
                + " attempt "
                + job.attempt()
                + "; whether it was handed back is unknown: release it again to learn the"
                + " outcome, or let the reaper take it back when the lease expires",
        () ->
            OwnTransaction.run(
                dsl,
                on -> {
                  Optional<OffsetDateTime> runAt =
                      jobs.release(on, queue, job.id(), job.attempt()).fetchOptional(jobs.runAt);
                  if (runAt.isPresent()) {
                    metrics.released();
                  } else {
                    // Not running at this attempt: this very release may have ended it already
                    // (a retry after a lost answer), which is answered as the first call was.
                    runAt =
                        jobs.releasedBy(
                                on,
                                queue,
                                job.id(),
                                job.attempt(),
                                job.failures(),
                                job.runAt().atOffset(ZoneOffset.UTC))
                            .fetchOptional(jobs.runAt);
                  }
                  if (runAt.isEmpty()) {
                    metrics.stale(Operation.RELEASE);
                    return Either.left(staleAttempt(on, job));
                  }
                  return Either.right(
                      new Finished(
                          job.id(), job.attempt(), JobState.READY, runAt.get().toInstant()));
                }));
  }

  private void requireOwn(Job<?> job) {
    if (!job.queue().equals(queue)) {
      throw new IllegalArgumentException(
          "Job "
              + job.id()
              + " belongs to queue \""
              + job.queue()
              + "\", not \""
              + queue
              + "\": finish it through the JobQueue that claimed it.");
    }
  }

  private StaleAttempt staleAttempt(DSLContext on, Job<?> job) {
    return toStale(job.id(), job.attempt(), jobs.current(on, queue, job.id()).fetchOptional());
  }

  private static StaleAttempt toStale(
      long id, long attempt, Optional<Record3<String, Long, OffsetDateTime>> now) {
    return new StaleAttempt(
        id,
        attempt,
        Option.ofOptional(now.map(r -> JobState.fromSql(r.value1()))),
        Option.ofOptional(now.map(Record3::value2)));
  }

  // -----------------------------------------------------------------------------------------------
  // Reaper, dead letters, retention, stats

  /**
   * Takes back every job of this queue whose lease has expired on the database's clock: each counts
   * a failed attempt (with the error "the lease of attempt n expired ...") and is {@code ready}
   * again at its old {@code run_at}, or dead-lettered when that was its last allowed attempt. Safe
   * to run from every worker at once (it skips rows others hold); the worker pool runs it every
   * {@link WorkerConfig#reapInterval()}.
   */
  public ReapResult reapExpired() {
    int requeued = 0;
    int dead = 0;
    while (true) {
      List<String> states =
          translate(
              () -> "re-queueing jobs with expired leases",
              () ->
                  OwnTransaction.run(
                      dsl,
                      on -> jobs.reap(on, queue, JobsTable.REAP_BATCH).fetch().into(String.class)));
      for (String s : states) {
        if (JobState.fromSql(s) == JobState.DEAD) {
          dead++;
        } else {
          requeued++;
        }
      }
      if (states.size() < JobsTable.REAP_BATCH) {
        break;
      }
    }
    metrics.reaped(requeued, dead);
    return new ReapResult(requeued, dead);
  }

  /**
   * Makes dead job {@code jobId} ready again, due now, with a fresh set of attempts (its failure
   * count restarts at zero; its attempt counter keeps increasing, because it is the token; its last
   * error stays until it is overwritten).
   *
   * <p>After a lost answer the revival may have landed. A retry then answers {@link
   * RetryDeadOutcome#NOT_DEAD}: the job is not dead any more, and nothing in its row tells a
   * revival by this caller's lost call from one by someone else, so the retry cannot claim it as
   * its own. Read the job to see: a revived job is ready (or claimed since) with its failures
   * restarted.
   *
   * @throws BackendUnavailableException when PostgreSQL fails; whether the job was revived is then
   *     unknown (see above)
   */
  public RetryDeadOutcome retryDead(long jobId) {
    return translate(
        () ->
            "retrying dead job "
                + jobId
                + "; whether it was revived is unknown. A retry answers NOT_DEAD if this call"
                + " revived it (it cannot tell its own revival from another caller's): read the"
                + " job to see",
        () -> {
          int updated;
          try {
            updated = OwnTransaction.run(dsl, on -> jobs.retryDead(on, queue, jobId).execute());
          } catch (DataAccessException e) {
            if (PG_UNIQUE_VIOLATION.equals(e.sqlState())) {
              return RetryDeadOutcome.UNIQUE_KEY_IN_USE;
            }
            throw e;
          }
          if (updated == 1) {
            return RetryDeadOutcome.REQUEUED;
          }
          boolean exists =
              OwnTransaction.run(dsl, on -> jobs.current(on, queue, jobId).fetchOptional())
                  .isPresent();
          return exists ? RetryDeadOutcome.NOT_DEAD : RetryDeadOutcome.NOT_FOUND;
        });
  }

  /**
   * Deletes this queue's jobs that completed more than {@code olderThan} ago (database clock), in
   * batches of {@link QueueConfig#purgeBatchSize()}, each its own short transaction. It locks only
   * finished rows and skips rows someone else holds, so claims and finishes never wait for it. Dead
   * jobs are kept: retry or delete them yourself.
   */
  public PurgeResult purgeFinished(Duration olderThan) {
    Objects.requireNonNull(olderThan, "olderThan");
    if (olderThan.isNegative()) {
      throw new IllegalArgumentException(
          "olderThan must be zero or more, got "
              + olderThan
              + ": it is the age of the finished"
              + " jobs to delete, e.g. Duration.ofDays(1).");
    }
    long deleted = 0;
    int batches = 0;
    int batch = config.purgeBatchSize();
    while (true) {
      int n =
          translate(
              () -> "purging finished jobs older than " + olderThan,
              () ->
                  OwnTransaction.run(dsl, on -> jobs.purge(on, queue, olderThan, batch).execute()));
      batches++;
      deleted += n;
      if (n < batch) {
        break;
      }
    }
    metrics.purged(deleted);
    return new PurgeResult(deleted, batches);
  }

  /**
   * Runs {@code VACUUM (SKIP_LOCKED)} on the jobs table. Every claim and finish leaves a dead row
   * version, and the ready index keeps an entry for each claimed job until a vacuum removes it;
   * claims start at the head of that index, so they walk past every such entry and slow down as
   * jobs go through (measured: a raw drain of 2,000,000 jobs on a server with autovacuum off fell
   * to 0.31 of its early rate). Autovacuum does this when it is on and keeps up; when it is off, or
   * lags behind a busy queue, call this, or let the pool do it ({@link
   * WorkerConfig.Builder#vacuumInterval}). Returns at once if another VACUUM holds the table.
   *
   * <p>Runs on a connection of the queue's pool, switched to autocommit for the statement if the
   * pool hands out transactional connections (VACUUM cannot run in a transaction block). Needs the
   * table's owner (from PostgreSQL 16, the MAINTAIN privilege is enough).
   *
   * @throws BackendUnavailableException when PostgreSQL refuses or fails it
   */
  public void vacuum() {
    translate(
        () ->
            "vacuuming the jobs table (the user must own it, or hold MAINTAIN on it from"
                + " PostgreSQL 16)",
        () ->
            dsl.connectionResult(
                connection -> {
                  boolean autoCommit = connection.getAutoCommit();
                  if (!autoCommit) {
                    connection.setAutoCommit(true);
                  }
                  try {
                    return jobs.vacuum(dsl.configuration().derive(connection).dsl()).execute();
                  } finally {
                    if (!autoCommit) {
                      connection.setAutoCommit(false);
                    }
                  }
                }));
  }

  /**
   * The due backlog now: ready jobs whose {@code run_at} has come (counted up to {@link
   * QueueConfig#readyCountCap()}) and the age of the oldest. One indexed query; the gauges call it
   * at most once per {@link QueueConfig#gaugeRefresh()}.
   */
  public ReadyStats readyStats() {
    Record3<Integer, OffsetDateTime, OffsetDateTime> row =
        translate(
            () -> "reading the ready backlog",
            () ->
                OwnTransaction.run(
                    dsl, on -> jobs.readyStats(on, queue, config.readyCountCap()).fetchSingle()));
    int depth = row.value1();
    Optional<Duration> age =
        Optional.ofNullable(row.value2())
            .map(oldest -> Duration.between(oldest, row.value3()))
            .filter(d -> !d.isNegative());
    return new ReadyStats(depth, depth >= config.readyCountCap(), age);
  }

  /**
   * Renders the statements a worker uses, without sending them. jOOQ's first rendering in a JVM
   * loads and initialises much of jOOQ (over 4 s measured in a cold, C1-only 128 MB JVM on a busy
   * 2-core machine); done inside a claim, that time would count against the lease of every job in
   * the first batch.
   */
  void warmUp() {
    List<long[]> pair = List.<long[]>of(new long[] {1, 1});
    jobs.claim(dsl, queue, 1, config.lease()).getSQL();
    jobs.complete(dsl, queue, 1, 1).getSQL();
    jobs.fail(dsl, queue, 1, 1, "", Duration.ZERO).getSQL();
    jobs.release(dsl, queue, 1, 1).getSQL();
    jobs.heartbeatWithoutWaiting(dsl, queue, pair, config.lease()).getSQL();
    jobs.reap(dsl, queue, 1).getSQL();
  }

  QueueMetrics metrics() {
    return metrics;
  }

  DataSource dataSource() {
    return dataSource;
  }

  private <R> R translate(Supplier<String> doing, Supplier<R> body) {
    try {
      return body.get();
    } catch (DataAccessException e) {
      throw new BackendUnavailableException(
          "PostgreSQL failed while "
              + doing.get()
              + " (queue \""
              + queue
              + "\", table "
              + jobs
              + "). Retry later. Cause: "
              + e.getMessage(),
          e);
    }
  }

  @Override
  public String toString() {
    return "JobQueue[" + config + "]";
  }

  /** Carries an exception of the caller's writes through jOOQ's transaction unchanged. */
  private static final class CallerWritesFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CallerWritesFailed(RuntimeException cause) {
      super(cause);
    }

    @Override
    public synchronized RuntimeException getCause() {
      return (RuntimeException) super.getCause();
    }
  }

  /** The ready stats for the gauges, re-read at most once per refresh interval. */
  private final class ReadySampler {
    private final ReentrantLock refreshing = new ReentrantLock();
    private volatile ReadyStats last;
    private volatile long lastAt;

    Optional<ReadyStats> get() {
      long now = System.nanoTime();
      if ((last == null || now - lastAt >= config.gaugeRefresh().toNanos())
          && refreshing.tryLock()) {
        try {
          last = readyStats();
          lastAt = now;
        } catch (RuntimeException e) {
          LOG.debug("Queue \"{}\": the ready gauges could not be refreshed", queue, e);
        } finally {
          refreshing.unlock();
        }
      }
      return Optional.ofNullable(last);
    }
  }
}
