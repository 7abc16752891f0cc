package dev.nolock.benchmarks;

import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * Claim, run and complete one job per invocation on the {@code SKIP LOCKED} queue; the handler's
 * work is nothing, so the figure is the queue's own cost. Each trial gets a fresh schema with
 * {@value #JOBS} ready jobs, more than any run drains, so every claim finds work; a claim that
 * comes back empty anyway is a conflict.
 *
 * <ul>
 *   <li>{@code queueJobQueue}: nolock's {@code JobQueue.claim(1)} then {@code complete(job)}.
 *   <li>{@code queueRawJdbc}: the floor, the same two statements through plain JDBC on the same
 *       pool: (1) the claim, {@code WITH c AS MATERIALIZED (SELECT id ... ORDER BY run_at, id LIMIT
 *       1 FOR UPDATE SKIP LOCKED) UPDATE ... SET state = 'running', attempt = attempt + 1,
 *       locked_until = clock_timestamp() + lease FROM c ... RETURNING ...}; (2) the completion,
 *       {@code UPDATE ... SET state = 'done' ... WHERE queue = ? AND id = ? AND attempt = ? AND
 *       state = 'running' RETURNING run_at}.
 * </ul>
 *
 * Fair because both send the same SQL text (the library's statements as jOOQ renders them) with the
 * queue's query timeout, each in autocommit on a connection of its own from the pool, exactly as
 * the library does: two round trips and two durable commits per job in both variants.
 *
 * <p>Contention is not a parameter here (every claim skips the rows others hold); {@code keys} has
 * the single value 1 so the report can treat every benchmark alike.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class QueueBenchmark {

  /** Ready jobs per trial: more than the longest profile drains at the highest thread count. */
  static final int JOBS = 400_000;

  /** The fewest ready jobs per turn of a paired run. */
  static final int TURN_JOBS = 40_000;

  /**
   * Above every rate measured here, in jobs per second: a turn gets this many jobs per second of
   * its length (its warm-up turn is the longest), so a turn never finds the queue empty.
   */
  static final int MAX_JOBS_PER_SECOND = 10_000;

  static final String QUEUE = "bench";

  /** The queue's default per-statement timeout, which the floor sets on the same statements. */
  static final int QUERY_TIMEOUT_SECONDS =
      Math.toIntExact(QueueConfig.custom(QUEUE).build().queryTimeout().toSeconds());

  /** The library's default lease, bound in milliseconds as the library binds it. */
  static final long LEASE_MILLIS = QueueConfig.custom(QUEUE).build().lease().toMillis();

  /** {@code JobsTable.claim} for {@code nolock_jobs} as jOOQ renders it. */
  static final String CLAIM =
      "with \"c\" as materialized (select \"id\" from \"nolock_jobs\" where (\"queue\" = ? and"
          + " \"state\" = 'ready' and \"run_at\" <= clock_timestamp()) order by \"run_at\","
          + " \"id\" fetch next ? rows only for update skip locked) update \"nolock_jobs\" as"
          + " \"j\" set \"state\" = 'running', \"attempt\" = (\"j\".\"attempt\" + 1),"
          + " \"locked_until\" = (clock_timestamp() + (? * cast(interval '0 years 0 mons 0 days 0"
          + " hours 0 mins 0.001 secs' as interval day to second))) from \"c\" where"
          + " \"j\".\"id\" = \"c\".\"id\" returning \"j\".\"id\", \"j\".\"attempt\","
          + " \"j\".\"payload\", \"j\".\"unique_key\", \"j\".\"run_at\", \"j\".\"enqueued_at\","
          + " \"j\".\"locked_until\", \"j\".\"failures\", \"j\".\"max_attempts\"";

  /** {@code JobsTable.complete} for {@code nolock_jobs} as jOOQ renders it. */
  static final String COMPLETE =
      "update \"nolock_jobs\" set \"state\" = 'done', \"locked_until\" = cast(? as timestamp with"
          + " time zone), \"finished_at\" = clock_timestamp() where (\"queue\" = ? and \"id\" = ?"
          + " and \"attempt\" = ? and \"state\" = 'running') returning \"run_at\"";

  /** A single value: see the class comment. */
  @Param({"1"})
  public int keys;

  private Bench.PgSchema schema;
  private JobQueue<byte[]> queue;

  @Setup(Level.Trial)
  public void setUp(BenchmarkParams params) {
    schema = Bench.freshSchema(params.getThreads());
    queue =
        JobQueue.create(
            schema.dataSource(), QueueConfig.custom(QUEUE).build(), PayloadCodec.bytes());
    queue.createTableIfMissing();
    fill(schema, TurnWorker.active() ? turnJobs(params) : JOBS);
  }

  private static int turnJobs(BenchmarkParams params) {
    long millis =
        params.getWarmup().getTime().convertTo(TimeUnit.MILLISECONDS)
            + params.getMeasurement().getTime().convertTo(TimeUnit.MILLISECONDS);
    return (int) Math.max(TURN_JOBS, millis * MAX_JOBS_PER_SECOND / 1000);
  }

  /**
   * Inserts {@code jobs} ready jobs in one statement, with the values the library's enqueue writes
   * (no unique key, the default {@code max_attempts}, {@code run_at} and {@code enqueued_at} from
   * {@code clock_timestamp()}), then vacuums so the claims start from a clean table with fresh
   * statistics.
   */
  static void fill(Bench.PgSchema schema, int jobs) {
    schema.execute(
        "INSERT INTO nolock_jobs (queue, state, attempt, failures, max_attempts, run_at, payload,"
            + " enqueued_at) SELECT '"
            + QUEUE
            + "', 'ready', 0, 0, "
            + QueueConfig.custom(QUEUE).build().maxAttempts()
            + ", clock_timestamp(), convert_to('job ' || g, 'UTF8'), clock_timestamp()"
            + " FROM generate_series(1, "
            + jobs
            + ") g");
    schema.execute("VACUUM ANALYZE nolock_jobs");
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    schema.close();
  }

  @Benchmark
  public void queueJobQueue(Outcomes outcomes) {
    List<Job<byte[]>> claimed = queue.claim(1);
    if (claimed.isEmpty()) {
      outcomes.of(false);
      return;
    }
    outcomes.of(queue.complete(claimed.get(0)).isRight());
  }

  @Benchmark
  public void queueRawJdbc(Outcomes outcomes) throws SQLException {
    long id;
    long attempt;
    try (Connection connection = schema.dataSource().getConnection();
        PreparedStatement claim = connection.prepareStatement(CLAIM)) {
      claim.setQueryTimeout(QUERY_TIMEOUT_SECONDS);
      claim.setString(1, QUEUE);
      claim.setInt(2, 1);
      claim.setLong(3, LEASE_MILLIS);
      try (ResultSet row = claim.executeQuery()) {
        if (!row.next()) {
          outcomes.of(false);
          return;
        }
        id = row.getLong(1);
        attempt = row.getLong(2);
        // The library reads every returned column to build its Job; so does the floor.
        row.getBytes(3);
        row.getString(4);
        row.getObject(5, java.time.OffsetDateTime.class);
        row.getObject(6, java.time.OffsetDateTime.class);
        row.getObject(7, java.time.OffsetDateTime.class);
        row.getInt(8);
        row.getInt(9);
      }
    }
    try (Connection connection = schema.dataSource().getConnection();
        PreparedStatement complete = connection.prepareStatement(COMPLETE)) {
      complete.setQueryTimeout(QUERY_TIMEOUT_SECONDS);
      complete.setNull(1, java.sql.Types.TIMESTAMP_WITH_TIMEZONE);
      complete.setString(2, QUEUE);
      complete.setLong(3, id);
      complete.setLong(4, attempt);
      try (ResultSet row = complete.executeQuery()) {
        outcomes.of(row.next());
      }
    }
  }
}
