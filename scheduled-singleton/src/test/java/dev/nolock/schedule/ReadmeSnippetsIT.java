package dev.nolock.schedule;

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
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's usage snippets, kept compiling and running. */
@ExtendWith(PostgresExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  /** The foreign system of the plain snippet. */
  interface Crm {
    void push(List<String> changes, String idempotencyKey, long fencingToken);
  }

  private static List<String> changesUpTo(Instant time) {
    return List.of("changes up to " + time);
  }

  @Test
  void theFencedSnippetWritesOneBatchPerScheduledTime(PostgresSchema schema) {
    schema
        .dsl()
        .execute(
            "CREATE TABLE invoice_batches (period_end timestamptz NOT NULL, attempt bigint NOT"
                + " NULL)");
    DataSource pool = schema.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();

    // --- README: Usage ---
    // Every 2 s for the demo; CronSchedule.unix("0 2 * * *") is 02:00 UTC every day.
    CronSchedule schedule = CronSchedule.quartz("0/2 * * * * ?");
    ScheduleConfig config =
        ScheduleConfig.custom("invoice-batch", schedule)
            .missedSchedules(MissedSchedules.runEach(10)) // every period must be invoiced
            .lease(Duration.ofSeconds(30)) // renewed every 10 s while the job runs
            .metrics(registry, "invoice-batch")
            .onOutcome(outcome -> System.out.println(outcome)) // or your logger
            .build();

    // Every instance of the fleet runs this; each scheduled time takes effect once.
    try (ScheduledSingleton invoicing =
        ScheduledSingleton.fenced(
            pool,
            config,
            (run, tx) ->
                // Written in the transaction that finishes the run: it commits only while this
                // attempt is the run's current one, so an instance that was paused writes nothing.
                tx.insertInto(table(name("invoice_batches")))
                    .set(field(name("period_end")), run.scheduledAt().atOffset(ZoneOffset.UTC))
                    .set(field(name("attempt")), run.attempt().value())
                    .execute())) {
      invoicing.createTableIfMissing();
      invoicing.start();
      // ... the application runs; close() waits for a running job, then stops the loop
      // --- end of README ---
      await("two batches")
          .atMost(Duration.ofSeconds(20))
          .until(() -> schema.dsl().fetchCount(table(name("invoice_batches"))) >= 2);
    }

    assertThat(
            schema
                .dsl()
                .resultQuery("SELECT count(*) = count(DISTINCT period_end) FROM invoice_batches")
                .fetchOne(0, Boolean.class))
        .isTrue();
    assertThat(registry.get("nolock.schedule.finished").counter().count())
        .isGreaterThanOrEqualTo(2);
  }

  @Test
  void thePlainSnippetPassesTheFenceKeyAndTheAttemptOn(PostgresSchema schema) {
    DataSource pool = schema.dataSource();
    List<String> calls = new CopyOnWriteArrayList<>();
    Crm crm = (changes, key, token) -> calls.add(key + " " + token + " " + changes);
    CronSchedule quarterHours = CronSchedule.unix("*/15 * * * *");
    Instant quarter =
        quarterHours
            .latestAtOrBefore(
                schema
                    .dsl()
                    .resultQuery("SELECT clock_timestamp()")
                    .fetchOne(0, java.time.OffsetDateTime.class)
                    .toInstant())
            .get();
    MutableClock clock = new MutableClock(quarter.minusSeconds(60));

    // --- README: Usage, plain job (with a test clock) ---
    ScheduledSingleton crmSync =
        ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("crm-sync", CronSchedule.unix("*/15 * * * *"))
                .clock(clock)
                .build(),
            run -> crm.push(changesUpTo(run.scheduledAt()), run.fenceKey(), run.attempt().value()));
    // --- end of README ---
    crmSync.createTableIfMissing();
    clock.set(quarter.plusMillis(100));
    List<RunOutcome> outcomes = crmSync.runDueNow();
    crmSync.close();

    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
    assertThat(calls).containsExactly("crm-sync@" + quarter + " 1 [changes up to " + quarter + "]");
  }

  /** The README shows the code the test above runs; the test sets up the pool and registry. */
  @Test
  void theReadmeShowsTheCodeTheFencedTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "DataSource pool = ...; // HikariCP (or any pool) on the database that holds your data"
                + " too")
        .readmeOnly("MeterRegistry registry = ...;")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }

  /** The README shows the code the test above runs, on a test clock. */
  @Test
  void theReadmeShowsTheCodeThePlainTestRuns() {
    ReadmeSnippet.javaBlock(README, "passes the token on:")
        .replacing(
            "CronSchedule.unix(\"*/15 * * * *\")).build(),",
            "CronSchedule.unix(\"*/15 * * * *\")).clock(clock).build(),")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage, plain job (with a test clock)");
  }
}
