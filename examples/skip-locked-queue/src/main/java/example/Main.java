package example;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.queue.Completion;
import dev.nolock.queue.EnqueueResult;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.WorkerConfig;
import dev.nolock.queue.WorkerPool;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** Two worker pools drain one queue: each job's effect commits exactly once. */
public final class Main {

  private static final int ORDERS = 20;

  public static void main(String[] args) throws Exception {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.execute("CREATE TABLE orders (id int PRIMARY KEY)");
    // No unique key on purpose: a job whose effect committed twice shows as two rows.
    dsl.execute("CREATE TABLE sent_receipts (job_id bigint NOT NULL, body text NOT NULL)");

    JobQueue<String> receipts =
        JobQueue.create(
            pool, QueueConfig.custom("receipts").maxAttempts(5).build(), PayloadCodec.utf8());
    receipts.createTableIfMissing();

    // Enqueue inside the business transaction: the job exists only if the order commits.
    for (int order = 0; order < ORDERS; order++) {
      int id = order;
      dsl.transaction(
          cfg -> {
            DSLContext tx = cfg.dsl();
            tx.insertInto(table(name("orders"))).set(field(name("id")), id).execute();
            receipts.enqueue(tx, NewJob.of("receipt for order " + id).uniqueKey("order-" + id));
          });
    }
    EnqueueResult again = receipts.enqueue(NewJob.of("receipt for order 0").uniqueKey("order-0"));
    check(
        again instanceof EnqueueResult.Duplicate, "a second pending receipt for order 0: " + again);
    System.out.println(ORDERS + " receipts enqueued; a second one for order 0: " + again);

    // Two instances work the queue off, four handlers each; a job is claimed by one of them.
    CountDownLatch handled = new CountDownLatch(ORDERS);
    try (WorkerPool<String> first =
            WorkerPool.start(receipts, config(), job -> send(job, handled));
        WorkerPool<String> second =
            WorkerPool.start(receipts, config(), job -> send(job, handled))) {
      check(handled.await(30, TimeUnit.SECONDS), "the receipts were not all handled in 30 s");
    } // close() lets running handlers finish and sends their completions

    int sent = dsl.fetchCount(table(name("sent_receipts")));
    int jobs =
        ((Number) dsl.fetchValue("SELECT count(DISTINCT job_id) FROM sent_receipts")).intValue();
    long ready = receipts.readyStats().readyJobs();
    System.out.println(
        "sent receipts: " + sent + " for " + jobs + " jobs, jobs still ready: " + ready);
    check(sent == jobs, (sent - jobs) + " receipts were sent twice");
    check(jobs == ORDERS, "expected " + ORDERS + " jobs' receipts, " + jobs + " were sent");
    check(ready == 0, ready + " jobs are still ready");

    dsl.execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: every job's effect committed once, across two worker pools");
  }

  private static WorkerConfig config() {
    return WorkerConfig.custom().concurrency(4).build();
  }

  /** The handler: the effect commits with the job's completion, or not at all. */
  private static Completion send(Job<String> job, CountDownLatch handled) {
    handled.countDown();
    return Completion.completeWith(
        tx ->
            tx.insertInto(table(name("sent_receipts")))
                .set(field(name("job_id")), job.id())
                .set(field(name("body")), job.payload())
                .execute());
  }

  /** A schema of this run's own, so that every run starts from empty tables. */
  private static DataSource freshSchema(String url, String schema) throws SQLException {
    try (Connection connection = DriverManager.getConnection(url)) {
      connection.createStatement().execute("CREATE SCHEMA " + schema);
    }
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(url);
    dataSource.setCurrentSchema(schema);
    return dataSource;
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
