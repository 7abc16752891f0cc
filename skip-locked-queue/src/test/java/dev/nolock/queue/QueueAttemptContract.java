package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The queue under testkit's {@link AttemptTokenContract}: an item is one job, alone in a queue of
 * its own (so a claim can only take the test's job); an attempt is a claim of it; the effect is a
 * row in a ledger with no unique key on the job, written in the finish's transaction. Subclasses
 * finish an attempt through one of the queue's public ways to commit an effect with a completion.
 *
 * <p>An attempt lapses as it would in production: its lease ({@value #LEASE_SECONDS} s, the
 * shortest {@link QueueConfig} allows; expiry is judged on the database's clock, which a test
 * cannot move) runs out, and the queue's reaper re-queues the job.
 */
@ExtendWith(PostgresExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class QueueAttemptContract extends AttemptTokenContract<Job<String>> {

  static final int LEASE_SECONDS = 1;

  private static final AtomicInteger QUEUES = new AtomicInteger();

  final PostgresSchema schema;
  final JdbcFaults faults;
  private final Map<String, Long> jobIds = new ConcurrentHashMap<>();

  QueueAttemptContract(PostgresSchema schema) {
    this.schema = schema;
    queue(schema.dataSource(), "setup").createTableIfMissing();
    // No unique key on job_id: a second commit of one job's effect stays visible as a second row.
    schema.dsl().execute("CREATE TABLE ledger (job_id bigint, attempt bigint)");
    this.faults = JdbcFaults.pool(schema.jdbcUrl());
  }

  @AfterEach
  void disarm() {
    faults.disarmAll();
  }

  @AfterAll
  void closeFaults() {
    faults.close();
  }

  /** The item's queue over {@code dataSource}: the same queue whichever pool reaches it. */
  static JobQueue<String> queue(DataSource dataSource, String item) {
    return JobQueue.create(
        dataSource,
        QueueConfig.custom(item).lease(Duration.ofSeconds(LEASE_SECONDS)).build(),
        PayloadCodec.utf8());
  }

  JobQueue<String> queue(Job<String> job) {
    return queue(schema.dataSource(), job.queue());
  }

  /** The job's effect: one ledger row, on the finish's transaction. */
  static int record(DSLContext tx, Job<String> job) {
    return tx.insertInto(table(name("ledger")))
        .set(field(name("job_id")), job.id())
        .set(field(name("attempt")), job.attempt())
        .execute();
  }

  @Override
  protected String newItem() {
    String item = "attempts-" + QUEUES.incrementAndGet();
    EnqueueResult enqueued = queue(schema.dataSource(), item).enqueue(NewJob.of(item));
    jobIds.put(item, ((EnqueueResult.Enqueued) enqueued).id());
    return item;
  }

  @Override
  protected Option<Job<String>> claim(String item) {
    List<Job<String>> claimed = queue(schema.dataSource(), item).claim(1);
    assertThat(claimed)
        .as("a claim of %s's queue takes its one job or nothing", item)
        .extracting(Job::id)
        .isSubsetOf(jobIds.get(item));
    return Option.ofOptional(claimed.stream().findFirst());
  }

  @Override
  protected void lapse(String item) {
    JobQueue<String> queue = queue(schema.dataSource(), item);
    await("the reaper re-queues the job of " + item + " once its lease has run out")
        .atMost(Duration.ofSeconds(10))
        .pollDelay(Duration.ZERO)
        .pollInterval(Duration.ofMillis(50))
        .until(queue::reapExpired, reaped -> reaped.requeued() == 1);
  }

  @Override
  protected long token(Job<String> attempt) {
    return attempt.attempt();
  }

  @Override
  protected int effects(String item) {
    return schema
        .dsl()
        .fetchCount(table(name("ledger")), field(name("job_id")).eq(jobIds.get(item)));
  }
}
