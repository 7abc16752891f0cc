package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's usage snippet, kept compiling and running. */
@ExtendWith(PostgresExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  @Test
  void theReadmeSnippetEnqueuesWithTheOrderAndWritesTheReceiptOnce(PostgresSchema schema) {
    schema.dsl().execute("CREATE TABLE orders (id int PRIMARY KEY)");
    schema.dsl().execute("CREATE TABLE sent_receipts (job_id bigint, body text)");
    DataSource pool = schema.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();
    PurgeResult purged;

    // --- README: Usage ---
    JobQueue<String> receipts =
        JobQueue.create(
            pool,
            QueueConfig.custom("receipts").maxAttempts(5).metrics(registry, "receipts").build(),
            PayloadCodec.utf8());
    receipts.createTableIfMissing();

    // Enqueue inside the business transaction: the job exists only if the order commits.
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    EnqueueResult enqueued =
        dsl.transactionResult(
            cfg -> {
              DSLContext tx = cfg.dsl();
              tx.insertInto(table(name("orders"))).set(field(name("id")), 42).execute();
              return receipts.enqueue(tx, NewJob.of("receipt for order 42").uniqueKey("order-42"));
            });
    // EnqueueResult.Duplicate("order-42") if a receipt for order 42 is already pending

    // Work them off: at most 8 handlers at once, woken by NOTIFY within milliseconds.
    try (WorkerPool<String> workers =
        WorkerPool.start(
            receipts,
            WorkerConfig.custom().concurrency(8).build(),
            job ->
                // The effect commits with the completion, or not at all (a stale attempt
                // writes nothing). Throwing fails the attempt: backoff, then dead letter.
                Completion.completeWith(
                    tx ->
                        tx.insertInto(table(name("sent_receipts")))
                            .set(field(name("job_id")), job.id())
                            .set(field(name("body")), job.payload())
                            .execute()))) {
      // ... the application runs; close() finishes or hands back the jobs in flight
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> schema.dsl().fetchCount(table(name("sent_receipts"))) == 1);
    }

    purged = receipts.purgeFinished(Duration.ofDays(7)); // retention: run it from a scheduler
    // --- end of snippet ---

    assertThat(enqueued).isInstanceOf(EnqueueResult.Enqueued.class);
    assertThat(schema.dsl().fetchValue("SELECT body FROM sent_receipts"))
        .isEqualTo("receipt for order 42");
    assertThat(purged.deleted()).as("the job finished moments ago").isZero();
    assertThat(registry.get("nolock.queue.completions").counter().count()).isEqualTo(1);
  }

  /**
   * The README shows the code the test above runs; the test sets up the pool and registry, waits
   * for the receipt and keeps the purge result.
   */
  @Test
  void theReadmeShowsTheCodeTheTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly("DataSource pool = ...; // HikariCP (or any pool), direct to PostgreSQL")
        .readmeOnly("MeterRegistry registry = ...;")
        .replacing(
            "// ... the application runs; close() finishes or hands back the jobs in flight",
            "// ... the application runs; close() finishes or hands back the jobs in flight"
                + " await().atMost(Duration.ofSeconds(10)).until(() ->"
                + " schema.dsl().fetchCount(table(name(\"sent_receipts\"))) == 1);")
        .replacing(
            "receipts.purgeFinished(Duration.ofDays(7)); // retention: run it from a scheduler,"
                + " e.g. hourly",
            "purged = receipts.purgeFinished(Duration.ofDays(7)); // retention: run it from a"
                + " scheduler")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }
}
