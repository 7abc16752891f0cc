package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.migration.MigrationChecks;
import dev.nolock.patterns.sql.migration.MigrationSchema;
import dev.nolock.patterns.sql.migration.NolockMigrations;
import dev.nolock.patterns.sql.migration.UpgradeCheck;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The runs table's shipped migrations ({@code nolock/migration/schedule}): the schema they make is
 * the one {@link ScheduledSingleton#createTableIfMissing} makes, they adopt a table it made, and a
 * later migration that runs while a job runs keeps the run claimed and lets it finish.
 */
@ExtendWith(PostgresExtension.class)
class ScheduleMigrationsIT {

  private static final NolockMigrations SCHEDULE = NolockMigrations.SCHEDULE;
  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  @Test
  void theMigrationsMakeWhatCreateTableIfMissingMakes(PostgresSchema pg) throws Exception {
    MigrationChecks.makeWhatCreateTableIfMissingMakes(
        SCHEDULE,
        pg,
        schema ->
            instance(schema.dataSource(), new MutableClock(Instant.now()), run -> {})
                .createTableIfMissing());
  }

  @Test
  void theMigrationsAdoptATableCreateTableIfMissingMade(PostgresSchema pg) throws Exception {
    MigrationChecks.adoptWhatCreateTableIfMissingMade(
        SCHEDULE,
        pg,
        schema ->
            instance(schema.dataSource(), new MutableClock(Instant.now()), run -> {})
                .createTableIfMissing());
  }

  /**
   * Live: a run that instance A claimed and whose job is running (held on a latch) while the later
   * migrations run. After them, instance B does not run it, and A's job finishes it.
   */
  @Test
  void laterMigrationsKeepARunningRunClaimed(PostgresSchema pg) throws Exception {
    MutableClock clock = new MutableClock(Instant.parse("2026-03-10T10:00:30Z"));
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    AtomicInteger runsOfB = new AtomicInteger();
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      ScheduledSingleton a =
          instance(
              schema.dataSource(),
              clock,
              run -> {
                started.countDown();
                assertThat(finish.await(30, TimeUnit.SECONDS)).isTrue();
              });
      ScheduledSingleton b = instance(schema.dataSource(), clock, run -> runsOfB.incrementAndGet());
      CompletableFuture<List<RunOutcome>> runOfA = new CompletableFuture<>();
      UpgradeCheck.assertUpgradeKeepsLiveState(
          SCHEDULE,
          schema,
          new UpgradeCheck.Live() {
            @Override
            public void create() throws InterruptedException {
              clock.set(Instant.parse("2026-03-10T10:01:00.100Z")); // the 10:01 run is due
              Thread runner = new Thread(() -> runOfA.complete(a.runDueNow()), "instance-a");
              runner.setDaemon(true);
              runner.start();
              assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
            }

            @Override
            public void stillWorks() throws Exception {
              b.runDueNow();
              assertThat(runsOfB).as("the run claimed before the upgrade is still A's").hasValue(0);
              finish.countDown();
              assertThat(runOfA.get(30, TimeUnit.SECONDS))
                  .singleElement()
                  .isInstanceOf(RunOutcome.Finished.class);
            }
          });
    } finally {
      finish.countDown();
    }
  }

  private static ScheduledSingleton instance(
      DataSource dataSource, MutableClock clock, PlainJob job) {
    return ScheduledSingleton.plain(
        dataSource,
        ScheduleConfig.custom("report", EVERY_MINUTE)
            .clock(clock)
            .claimWindow(MutableClock.ANY_DATE)
            .build(),
        job);
  }
}
