package dev.nolock.schedule;

import dev.nolock.testkit.ConcurrentCreators;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Instances that start at once on an empty schema all call {@code createTableIfMissing()}: none may
 * fail because another created the runs table or its index first (PostgreSQL answers the loser of
 * {@code CREATE ... IF NOT EXISTS} with SQLState 23505 or 42P07), and the table is checked as
 * always.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreateIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  @Test
  void instancesCreatingTheTableAtOnceAllSucceed(PostgresSchema pg) {
    ConcurrentCreators.assertAllSucceed(
        pg,
        "racing_runs",
        5,
        table ->
            ScheduledSingleton.plain(
                pg.dataSource(),
                ScheduleConfig.custom("race", EVERY_MINUTE).table(table).build(),
                run -> {}),
        ScheduledSingleton::createTableIfMissing);
  }
}
