package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.schedule.internal.RunTable;
import dev.nolock.testkit.HeldAdvisoryLock;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The advisory lock that serialises a job's claims is in the schedule's own namespace, keyed on the
 * table's OID: another application's advisory lock on {@code hashtextextended('<table>/<job>', 0)}
 * (the key before the namespace existed) does not hold a claim up, while a holder of the schedule's
 * own key, {@code 'nolock.schedule.claims:' || <table's oid> || '/' || <job>}, does. That the key
 * follows the table rather than its spelling is {@link ClaimLockTableSpellingIT}'s. That
 * overlapping claims of a job still take turns, and what goes wrong without the lock, is {@link
 * ConcurrentClaimIT}'s.
 */
@ExtendWith(PostgresExtension.class)
class ClaimLockKeyIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  private final PostgresSchema schema;

  /** Qualified, so that no other test class uses the same keys on the shared database. */
  private final String table;

  ClaimLockKeyIT(PostgresSchema schema) {
    this.schema = schema;
    this.table = schema.schemaName() + ".key_runs";
  }

  @Test
  void anAdvisoryLockOnTheBareTableAndJobDoesNotBlockAClaim() throws Exception {
    String job = "report";
    try (HeldAdvisoryLock other = HeldAdvisoryLock.hold(schema.jdbcUrl(), table + "/" + job)) {
      Pass pass = startDuePass(job);

      assertThat(other.blocks(pass.outcomes))
          .as("the claim waits for a lock on hashtextextended('%s/%s', 0)", table, job)
          .isFalse();
      assertThat(pass.finish()).singleElement().isInstanceOf(RunOutcome.Finished.class);
    }
  }

  /** The negative control: the same detection catches a holder of the schedule's own key. */
  @Test
  void theSchedulesOwnKeyStillBlocksAClaim() throws Exception {
    String job = "own-key";
    long oid = tableOid();
    Pass pass;
    try (HeldAdvisoryLock sameJob =
        HeldAdvisoryLock.hold(schema.jdbcUrl(), "nolock.schedule.claims:" + oid + "/" + job)) {
      pass = startDuePass(job);

      assertThat(sameJob.blocks(pass.outcomes))
          .as("the claim waits for the holder of the schedule's key for %s/%s", table, job)
          .isTrue();
    }
    assertThat(pass.finish()).singleElement().isInstanceOf(RunOutcome.Finished.class);
  }

  /** Creates the table unless it exists and reads its OID. */
  private long tableOid() {
    new RunTable(table, Duration.ofSeconds(5)).createIfMissing(schema.dsl());
    return schema
        .dsl()
        .resultQuery("SELECT to_regclass({0})::oid::bigint", DSL.val(table))
        .fetchOne(0, Long.class);
  }

  /** A pass of {@code job} with one time due, running. */
  private record Pass(ScheduledSingleton instance, CompletableFuture<List<RunOutcome>> outcomes) {
    List<RunOutcome> finish() throws Exception {
      try (instance) {
        return outcomes.get(30, TimeUnit.SECONDS);
      }
    }
  }

  private Pass startDuePass(String job) {
    Instant dbNow =
        schema
            .dsl()
            .resultQuery("SELECT clock_timestamp()")
            .fetchOne(0, OffsetDateTime.class)
            .toInstant();
    Instant due = EVERY_MINUTE.latestAtOrBefore(dbNow).get();
    MutableClock clock = new MutableClock(due.minusSeconds(1));
    ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom(job, EVERY_MINUTE).table(table).clock(clock).build(),
            run -> {});
    instance.createTableIfMissing();
    assertThat(instance.runDueNow()).as("nothing due before the instance started").isEmpty();
    clock.set(due.plusSeconds(1));
    return new Pass(instance, CompletableFuture.supplyAsync(instance::runDueNow));
  }
}
