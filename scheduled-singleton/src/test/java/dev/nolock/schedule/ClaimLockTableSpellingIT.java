package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.schedule.internal.RunTable;
import dev.nolock.testkit.HeldAdvisoryLock;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The claim lock of a job is the lock of the table, however the configuration spells it: a claim
 * through an instance configured with {@code schema.table} waits while another transaction holds
 * the claim lock taken through {@code table} (resolved on the search path to the same table), so
 * the claims of the two instances take turns. The control: a claim lock of another table with the
 * same job name does not hold the claim up. A missing table fails the lock's statement.
 */
@ExtendWith(PostgresExtension.class)
class ClaimLockTableSpellingIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  private final PostgresSchema schema;

  ClaimLockTableSpellingIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @Test
  void aClaimThroughTheQualifiedNameWaitsForTheClaimLockTakenThroughTheBareName() throws Exception {
    String job = "spelled-twice";
    new RunTable("spelling_runs", Duration.ofSeconds(5)).createIfMissing(schema.dsl());
    Pass pass;
    try (HeldAdvisoryLock bare = claimLock(schema.jdbcUrl(), "spelling_runs", job)) {
      pass = startDuePass(schema.schemaName() + ".spelling_runs", job);

      assertThat(bare.blocks(pass.outcomes))
          .as(
              "the claim through %s.spelling_runs waits for spelling_runs' claim lock",
              schema.schemaName())
          .isTrue();
    }
    assertThat(pass.finish()).singleElement().isInstanceOf(RunOutcome.Finished.class);
  }

  /** The control: the same detection, a claim lock of the same job on another table. */
  @Test
  void theClaimLockOfAnotherTableDoesNotHoldAClaimUp() throws Exception {
    String job = "other-table";
    schema.dsl().execute("CREATE TABLE other_runs (id int)");
    try (HeldAdvisoryLock other = claimLock(schema.jdbcUrl(), "other_runs", job)) {
      Pass pass = startDuePass(schema.schemaName() + ".control_runs", job);

      assertThat(other.blocks(pass.outcomes))
          .as("the claim on control_runs waits for other_runs' claim lock")
          .isFalse();
      assertThat(pass.finish()).singleElement().isInstanceOf(RunOutcome.Finished.class);
    }
  }

  /**
   * A missing table fails the lock's statement, saying so, rather than locking nothing (the lock of
   * a null key returns at once).
   */
  @Test
  void theClaimLockOfAMissingTableFails() {
    assertThatThrownBy(
            () ->
                new RunTable("never_created_runs", Duration.ofSeconds(5))
                    .lockClaims(schema.dsl(), "any"))
        .isInstanceOf(DataAccessException.class)
        .hasMessageContaining("relation \"never_created_runs\" does not exist");
  }

  /** A claim lock taken by {@link RunTable#lockClaims} in a transaction left open. */
  private static HeldAdvisoryLock claimLock(String jdbcUrl, String table, String job)
      throws SQLException {
    return HeldAdvisoryLock.holdBy(
        jdbcUrl,
        "the claim lock of " + table + "/" + job,
        connection ->
            new RunTable(table, Duration.ofSeconds(5))
                .lockClaims(DSL.using(connection, SQLDialect.POSTGRES), job));
  }

  private record Pass(ScheduledSingleton instance, CompletableFuture<List<RunOutcome>> outcomes) {
    List<RunOutcome> finish() throws Exception {
      try (instance) {
        return outcomes.get(30, TimeUnit.SECONDS);
      }
    }
  }

  private Pass startDuePass(String table, String job) {
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
