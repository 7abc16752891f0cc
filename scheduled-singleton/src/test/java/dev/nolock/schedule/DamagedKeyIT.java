package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.name;

import dev.nolock.schedule.internal.RunTable;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A runs table that lost its unique key on {@code (job, scheduled_at)} after it was created (the
 * shape check of {@code createTableIfMissing} refuses one that never had it) holds two rows of one
 * run's attempt: a finish or a renewal that matches both is never reported as success.
 */
@ExtendWith(PostgresExtension.class)
class DamagedKeyIT {

  private static final String JOB = "damaged";
  private static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");

  @Test
  void aFinishThatMatchesTwoRowsIsNeverAFinish(PostgresSchema s) {
    RunTable table = twoRowsOfOneAttempt(s.dsl(), "finish_runs");

    assertThatThrownBy(() -> table.finish(s.dsl(), JOB, THREE_AM, 1, true))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("changed 2 rows")
        .hasMessageContaining("(job, scheduled_at)");
  }

  @Test
  void aRenewalThatMatchesTwoRowsIsNeverARenewal(PostgresSchema s) {
    RunTable table = twoRowsOfOneAttempt(s.dsl(), "renew_runs");

    assertThatThrownBy(() -> table.renew(s.dsl(), JOB, THREE_AM, 1, Duration.ofMinutes(1), true))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("changed 2 rows");
  }

  private static RunTable twoRowsOfOneAttempt(DSLContext dsl, String tableName) {
    RunTable table = new RunTable(tableName, Duration.ofSeconds(5));
    dsl.execute(table.ddlSql(dsl).get(0));
    String primaryKey =
        dsl.fetchValue(
                "SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass(?)"
                    + " AND contype = 'p'",
                tableName)
            .toString();
    dsl.alterTable(name(tableName)).dropConstraint(name(primaryKey)).execute();
    OffsetDateTime at = OffsetDateTime.ofInstant(THREE_AM, ZoneOffset.UTC);
    for (int i = 0; i < 2; i++) {
      dsl.execute(
          "INSERT INTO "
              + tableName
              + " (job, scheduled_at, state, attempt, owner, locked_until, covers_from, missed,"
              + " claimed_at) VALUES (?, CAST(? AS timestamptz), 'running', 1, 'a#0',"
              + " clock_timestamp() + interval '1 minute', CAST(? AS timestamptz), 0,"
              + " clock_timestamp())",
          JOB,
          at,
          at);
    }
    return table;
  }
}
