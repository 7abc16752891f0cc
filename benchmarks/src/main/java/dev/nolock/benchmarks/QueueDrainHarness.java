package dev.nolock.benchmarks;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.SchedulerName;
import com.github.kagkarlsson.scheduler.event.AbstractSchedulerListener;
import com.github.kagkarlsson.scheduler.task.ExecutionComplete;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import dev.nolock.queue.Completion;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.WorkerConfig;
import dev.nolock.queue.WorkerPool;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Types;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.function.Consumer;

/**
 * Drains {@link Profile#queueJobs()} ready jobs with {@value #WORKERS} worker threads, once per
 * variant, each on a fresh schema filled up front (the fill is not measured), and reports jobs per
 * second over the whole drain and in each tenth of it ({@code decile1}..{@code decile10}), plus
 * {@code lastTenthOverSecond}: the decay check of benchmarks/GOALS.md, against the second tenth
 * because the first includes the workers' start (at least 0.9 over 2 million jobs). The handler
 * does nothing, so the figures are the queues' own cost.
 *
 * <ol>
 *   <li>{@code queueDrainRawJdbc}, the floor: {@value #WORKERS} threads each loop over two
 *       transactions per batch, committed separately as the worker pool commits them: the library's
 *       claim statement ({@code WITH c AS MATERIALIZED (SELECT ... LIMIT 10 FOR UPDATE SKIP LOCKED)
 *       UPDATE ... RETURNING}) for {@value #BATCH} jobs, every returned column read, then the
 *       library's batch completion ({@code JobQueue.completeAll}'s statement: the rows whose
 *       attempt is still running locked in id order, updated and returned), each in autocommit with
 *       the queue's statement timeout; a thread stops when a claim comes back empty.
 *   <li>{@code queueDrainWorkerPool}: nolock's {@code WorkerPool} with concurrency {@value
 *       #WORKERS}, batch size {@value #BATCH} and {@value #CLAIMS_IN_FLIGHT} claims in flight (as
 *       many as the floor's threads), the handler returning {@code Completion.complete()}; its
 *       dispatchers claim in batches, and the completions that are waiting go out together in one
 *       conditional statement per completer ({@code JobQueue.completeAll}).
 *   <li>{@code queueDrainDbScheduler}, the peer: db-scheduler's {@code OneTimeTask} that does
 *       nothing, its executions inserted up front into its {@code scheduled_tasks} table (the
 *       PostgreSQL DDL of its documentation), a {@code Scheduler} with {@value #WORKERS} threads,
 *       polling by lock-and-fetch with the fractions its README gives "for high throughput (i.e.
 *       keep threads busy)", {@code pollUsingLockAndFetch(1.0, 4.0)}: a fetch when no more than one
 *       execution per thread is left, of up to four per thread, every {@value #POLL_MILLIS} ms at
 *       most; each execution is deleted on completion, as a one-time task's are. Its README
 *       benchmarks use 20 to 100 threads on four scheduler machines; here it has the same {@value
 *       #WORKERS} threads as the other two variants on one machine.
 * </ol>
 *
 * A job counts when it is finished: after the raw batch's completion commits, and in db-scheduler's
 * {@code onExecutionComplete} (called after the execution's row is deleted). The worker pool offers
 * no hook after its completion commits, so its handler counts, ahead of the commits by the
 * completions waiting or in flight (fewer than twice its 40 held jobs); the pool is then closed and
 * the done rows counted, which must equal the jobs. All variants use the same pool size; no variant
 * sleeps to synchronise.
 *
 * <p>Every variant's table is vacuumed ({@code VACUUM (SKIP_LOCKED)}) from a side thread each time
 * another {@value #VACUUM_EVERY_JOBS} jobs have finished: the raw floor's and the worker pool's
 * through {@code JobQueue.vacuum()}, db-scheduler's with the same statement. Counted in jobs, not
 * on a timer, so a short drain is vacuumed as often per job as a long one and a faster variant no
 * less often than a slower one. The PostgreSQL here runs with autovacuum off (as CI's does), and
 * without any vacuum a claim walks past the dead index entry of every job claimed before it: over
 * 2,000,000 jobs the raw floor fell to 0.31 of its early rate, the worker pool to 0.34.
 */
public final class QueueDrainHarness implements Harness {

  static final int WORKERS = 4;
  static final int BATCH = 10;
  static final int VACUUM_EVERY_JOBS = 5_000;
  static final int POLL_MILLIS = 20;

  /** As many claims in flight as the raw floor has threads. */
  static final int CLAIMS_IN_FLIGHT = WORKERS;

  /**
   * Pool connections, the same for every variant: what the worker pool's README asks for (handlers,
   * dispatchers, completers, heartbeat, reaper, vacuum, LISTEN).
   */
  private static final int POOL_THREADS = WORKERS + 2 * CLAIMS_IN_FLIGHT + 5;

  /**
   * {@code JobQueue.completeAll}'s statement as jOOQ renders it for {@code n} jobs (captured from
   * pgjdbc's log of the worker pool's drain; {@code QueueDrainSqlTest} checks it against the
   * library): the rows locked in id order, then updated, their id, attempt and run_at returned.
   */
  static String completeAll(int n) {
    StringBuilder pairs = new StringBuilder();
    for (int i = 0; i < n; i++) {
      pairs.append(i == 0 ? "" : ", ").append("(?, ?)");
    }
    return "with \"c\" as materialized (select \"id\" from \"nolock_jobs\" where (\"queue\" = ? and"
        + " (\"id\", \"attempt\") in ("
        + pairs
        + ") and \"state\" = 'running') order by \"id\" for update) update \"nolock_jobs\" as \"j\""
        + " set \"state\" = 'done', \"locked_until\" = cast(? as timestamp with time zone),"
        + " \"finished_at\" = clock_timestamp() from \"c\" where \"j\".\"id\" = \"c\".\"id\""
        + " returning \"j\".\"id\", \"j\".\"attempt\", \"j\".\"run_at\"";
  }

  private static final String TASK = "bench-job";

  @Override
  public String title() {
    return "Queue drain: SKIP LOCKED queue vs its raw floor vs db-scheduler";
  }

  @Override
  public List<HarnessResult> run(Profile profile, Consumer<String> progress) throws Exception {
    int jobs = profile.queueJobs();
    List<HarnessResult> results = new ArrayList<>();
    results.add(report(progress, "queueDrainRawJdbc", rawJdbc(jobs)));
    results.add(report(progress, "queueDrainWorkerPool", workerPool(jobs)));
    results.add(report(progress, "queueDrainDbScheduler", dbScheduler(jobs)));
    return results;
  }

  private static HarnessResult report(Consumer<String> progress, String id, Drain drain) {
    HarnessResult result = drain.result(id);
    progress.accept(
        String.format(
            Locale.ROOT,
            "%s: %d jobs in %.1f s, %.0f jobs/s, last tenth / second %s",
            id,
            drain.jobs,
            drain.seconds(),
            result.perSecond(),
            result.detail().get("lastTenthOverSecond")));
    return result;
  }

  // ---------------------------------------------------------------------------------------------

  private static Drain rawJdbc(int jobs) throws Exception {
    try (Bench.PgSchema schema = Bench.freshSchema(POOL_THREADS)) {
      JobQueue<byte[]> queue =
          JobQueue.create(
              schema.dataSource(),
              QueueConfig.custom(QueueBenchmark.QUEUE).build(),
              PayloadCodec.bytes());
      queue.createTableIfMissing();
      QueueBenchmark.fill(schema, jobs);
      Drain drain = new Drain(jobs);
      ExecutorService threads = Executors.newFixedThreadPool(WORKERS);
      try (Vacuum vacuum = new Vacuum(queue::vacuum, drain)) {
        drain.start();
        List<Future<?>> workers = new ArrayList<>();
        for (int i = 0; i < WORKERS; i++) {
          workers.add(
              threads.submit(
                  () -> {
                    while (drainBatch(schema, drain)) {
                      // until a claim comes back empty
                    }
                    return null;
                  }));
        }
        for (Future<?> worker : workers) {
          worker.get(drain.timeoutMillis(), TimeUnit.MILLISECONDS);
        }
        drain.awaitAll();
      } finally {
        threads.shutdownNow();
      }
      drain.check(countDone(schema, "SELECT count(*) FROM nolock_jobs WHERE state = 'done'"));
      return drain;
    }
  }

  /**
   * Two transactions, as the worker pool commits them: claim up to a batch (committed, so the
   * leases hold while the jobs run), then complete the batch; false when nothing was claimed. Each
   * is one statement in autocommit with the queue's statement timeout.
   */
  private static boolean drainBatch(Bench.PgSchema schema, Drain drain) throws SQLException {
    List<Long> ids = new ArrayList<>(BATCH);
    List<Long> attempts = new ArrayList<>(BATCH);
    try (Connection connection = schema.dataSource().getConnection();
        PreparedStatement claim = connection.prepareStatement(QueueBenchmark.CLAIM)) {
      claim.setQueryTimeout(QueueBenchmark.QUERY_TIMEOUT_SECONDS);
      claim.setString(1, QueueBenchmark.QUEUE);
      claim.setInt(2, BATCH);
      claim.setLong(3, QueueBenchmark.LEASE_MILLIS);
      try (ResultSet rows = claim.executeQuery()) {
        while (rows.next()) {
          ids.add(rows.getLong(1));
          attempts.add(rows.getLong(2));
          // The library reads every returned column to build its Job; so does the floor.
          rows.getBytes(3);
          rows.getString(4);
          rows.getObject(5, OffsetDateTime.class);
          rows.getObject(6, OffsetDateTime.class);
          rows.getObject(7, OffsetDateTime.class);
          rows.getInt(8);
          rows.getInt(9);
        }
      }
    }
    if (ids.isEmpty()) {
      return false;
    }
    try (Connection connection = schema.dataSource().getConnection();
        PreparedStatement complete = connection.prepareStatement(completeAll(ids.size()))) {
      complete.setQueryTimeout(QueueBenchmark.QUERY_TIMEOUT_SECONDS);
      int p = 1;
      complete.setString(p++, QueueBenchmark.QUEUE);
      for (int i = 0; i < ids.size(); i++) {
        complete.setLong(p++, ids.get(i));
        complete.setLong(p++, attempts.get(i));
      }
      complete.setNull(p, Types.VARCHAR);
      int done = 0;
      try (ResultSet rows = complete.executeQuery()) {
        while (rows.next()) {
          rows.getLong(1);
          rows.getLong(2);
          rows.getObject(3, OffsetDateTime.class);
          done++;
        }
      }
      drain.completed(done);
    }
    return true;
  }

  // ---------------------------------------------------------------------------------------------

  private static Drain workerPool(int jobs) throws Exception {
    try (Bench.PgSchema schema = Bench.freshSchema(POOL_THREADS)) {
      JobQueue<byte[]> queue =
          JobQueue.create(
              schema.dataSource(),
              QueueConfig.custom(QueueBenchmark.QUEUE).build(),
              PayloadCodec.bytes());
      queue.createTableIfMissing();
      QueueBenchmark.fill(schema, jobs);
      Drain drain = new Drain(jobs);
      WorkerConfig config =
          WorkerConfig.custom()
              .concurrency(WORKERS)
              .batchSize(BATCH)
              .claimsInFlight(CLAIMS_IN_FLIGHT)
              .build();
      drain.start();
      try (Vacuum vacuum = new Vacuum(queue::vacuum, drain);
          WorkerPool<byte[]> pool =
              WorkerPool.start(
                  queue,
                  config,
                  job -> {
                    drain.completed(1);
                    return Completion.complete();
                  })) {
        drain.awaitAll();
      }
      drain.check(countDone(schema, "SELECT count(*) FROM nolock_jobs WHERE state = 'done'"));
      return drain;
    }
  }

  // ---------------------------------------------------------------------------------------------

  private static Drain dbScheduler(int jobs) throws Exception {
    try (Bench.PgSchema schema = Bench.freshSchema(POOL_THREADS)) {
      // db-scheduler 16.x's PostgreSQL DDL (its documentation's postgresql_tables.sql).
      schema.execute(
          "CREATE TABLE scheduled_tasks (task_name text NOT NULL, task_instance text NOT NULL,"
              + " task_data bytea, execution_time timestamp with time zone NOT NULL, picked"
              + " boolean NOT NULL, picked_by text, last_success timestamp with time zone,"
              + " last_failure timestamp with time zone, consecutive_failures int, last_heartbeat"
              + " timestamp with time zone, version bigint NOT NULL, priority smallint,"
              + " PRIMARY KEY (task_name, task_instance))");
      schema.execute("CREATE INDEX execution_time_idx ON scheduled_tasks (execution_time)");
      schema.execute("CREATE INDEX last_heartbeat_idx ON scheduled_tasks (last_heartbeat)");
      schema.execute(
          "CREATE INDEX priority_execution_time_idx ON scheduled_tasks"
              + " (priority desc, execution_time asc)");
      // The row scheduleBatch writes for a one-time task without data (no priority when priority
      // is not enabled), due now and in insertion order; one statement instead of a JDBC batch.
      schema.execute(
          "INSERT INTO scheduled_tasks (task_name, task_instance, task_data, execution_time,"
              + " picked, version) SELECT '"
              + TASK
              + "', 'job-' || g, NULL, now() - interval '1 hour' + g * interval '1 microsecond',"
              + " false, 1 FROM generate_series(1, "
              + jobs
              + ") g");
      schema.execute("VACUUM ANALYZE scheduled_tasks");
      Drain drain = new Drain(jobs);
      OneTimeTask<Void> task = Tasks.oneTime(TASK).execute((instance, context) -> {});
      Scheduler scheduler =
          Scheduler.create(schema.dataSource(), task)
              .schedulerName(new SchedulerName.Fixed("bench"))
              .threads(WORKERS)
              .pollingInterval(Duration.ofMillis(POLL_MILLIS))
              .pollUsingLockAndFetch(1.0, 4.0)
              .addSchedulerListener(
                  new AbstractSchedulerListener() {
                    @Override
                    public void onExecutionComplete(ExecutionComplete complete) {
                      if (complete.getResult() == ExecutionComplete.Result.OK) {
                        drain.completed(1);
                      }
                    }
                  })
              .build();
      drain.start();
      scheduler.start();
      try (Vacuum vacuum =
          new Vacuum(() -> schema.execute("VACUUM (SKIP_LOCKED) scheduled_tasks"), drain)) {
        drain.awaitAll();
      } finally {
        scheduler.stop();
      }
      drain.check(jobs - countDone(schema, "SELECT count(*) FROM scheduled_tasks"));
      return drain;
    }
  }

  private static long countDone(Bench.PgSchema schema, String sql) throws SQLException {
    try (Connection connection = schema.dataSource().getConnection();
        PreparedStatement count = connection.prepareStatement(sql);
        ResultSet row = count.executeQuery()) {
      row.next();
      return row.getLong(1);
    }
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * Runs a vacuum on a side thread each time another {@value #VACUUM_EVERY_JOBS} jobs of the drain
   * have finished, until closed.
   */
  private static final class Vacuum implements AutoCloseable {
    private static final long CHECK_MILLIS = 50;
    private final ScheduledExecutorService thread = Executors.newSingleThreadScheduledExecutor();
    private long nextAt = VACUUM_EVERY_JOBS;

    Vacuum(Runnable vacuum, Drain drain) {
      thread.scheduleWithFixedDelay(
          () -> {
            long done = drain.done();
            if (done < nextAt) {
              return;
            }
            // From the count after this vacuum's start, so a vacuum slower than the drain never
            // runs back to back.
            nextAt = done + VACUUM_EVERY_JOBS;
            try {
              vacuum.run();
            } catch (RuntimeException e) {
              // A failed vacuum must not end the schedule (a throwing task is never run again).
              System.err.println("vacuum failed at " + done + " jobs, trying again later: " + e);
            }
          },
          CHECK_MILLIS,
          CHECK_MILLIS,
          TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() {
      thread.shutdownNow();
    }
  }

  /** Counts completions and stamps the moment each tenth of the drain is reached. */
  static final class Drain {
    final int jobs;
    private final AtomicLong done = new AtomicLong();
    private final AtomicLongArray tenthAt = new AtomicLongArray(11);
    private final CountDownLatch finished = new CountDownLatch(1);

    Drain(int jobs) {
      this.jobs = jobs;
    }

    void start() {
      tenthAt.set(0, System.nanoTime());
    }

    /** Called by whoever finished {@code n} more jobs. */
    long done() {
      return done.get();
    }

    void completed(int n) {
      long after = done.addAndGet(n);
      long before = after - n;
      long now = System.nanoTime();
      for (int tenth = 1; tenth <= 10; tenth++) {
        long boundary = (long) jobs * tenth / 10;
        if (before < boundary && after >= boundary) {
          tenthAt.set(tenth, now);
        }
      }
      if (before < jobs && after >= jobs) {
        finished.countDown();
      }
    }

    /** A generous bound: a drain slower than 100 jobs/s is broken, not slow. */
    long timeoutMillis() {
      return 60_000L + jobs * 10L;
    }

    void awaitAll() throws InterruptedException, TimeoutException {
      if (!finished.await(timeoutMillis(), TimeUnit.MILLISECONDS)) {
        throw new TimeoutException("the drain stopped at " + done.get() + " of " + jobs + " jobs");
      }
    }

    void check(long finishedInDatabase) {
      if (finishedInDatabase != jobs) {
        throw new IllegalStateException(
            finishedInDatabase + " jobs finished in the database, expected " + jobs);
      }
    }

    double seconds() {
      return (tenthAt.get(10) - tenthAt.get(0)) / 1e9;
    }

    HarnessResult result(String id) {
      Map<String, String> detail = new LinkedHashMap<>();
      double tenth = jobs / 10.0;
      double first = 0;
      double last = 0;
      for (int i = 1; i <= 10; i++) {
        double rate = tenth / ((tenthAt.get(i) - tenthAt.get(i - 1)) / 1e9);
        detail.put("decile" + i, String.format(Locale.ROOT, "%.0f", rate));
        if (i == 2) {
          first = rate; // the first tenth includes the workers' start and the ramp-up of claims
        }
        last = rate;
      }
      detail.put("lastTenthOverSecond", String.format(Locale.ROOT, "%.2f", last / first));
      return new HarnessResult(id, WORKERS, jobs / seconds(), detail);
    }
  }
}
