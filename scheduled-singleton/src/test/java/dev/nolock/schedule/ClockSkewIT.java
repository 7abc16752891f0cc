package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Instances whose wall clocks are 40 days behind or ahead of the database's, on the real table
 * after retention: a fleet on correct clocks ran a daily job for 60 days, the instance on a correct
 * clock runs the latest day, and the rows older than 30 days are deleted as the README's retention
 * statement does. Times are taken from PostgreSQL's {@code clock_timestamp()}; the instances' wall
 * clocks are set relative to it. A few hundred milliseconds per test.
 */
@ExtendWith(PostgresExtension.class)
class ClockSkewIT {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  private static final Duration FORTY_DAYS = Duration.ofDays(40);

  private PostgresSchema schema;
  private Runs runs;
  private Instant dbNow;

  /** The latest 03:00 at or before the database's clock: the day instance A runs. */
  private Instant latestDay;

  /** Every run of the job, by any instance of the test. */
  private final List<ScheduledRun> ran = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void createRunsTable(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
  }

  @BeforeEach
  void readTheDatabaseClock(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    dbNow =
        s.dsl()
            .resultQuery("SELECT clock_timestamp()")
            .fetchOne(0, OffsetDateTime.class)
            .toInstant();
    latestDay = DAILY_AT_3.latestAtOrBefore(dbNow).orElseThrow();
  }

  @Test
  void anInstanceFortyDaysBehindDoesNotRunAgainATimeWhoseRowRetentionDeleted() {
    String job = "behind";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));

    List<RunOutcome> outcomes = passADayLater(behind, config(job, behind));

    Instant stale = DAILY_AT_3.latestAtOrBefore(behind.instant()).orElseThrow();
    assertThat(ran)
        .as(
            "an instance whose clock is 40 days behind must not run %s again: it ran %s ago and"
                + " retention deleted its row (outcomes: %s)",
            stale, Duration.between(stale, dbNow), outcomes)
        .isEmpty();
    assertThat(runs.at(job, stale)).as("no row inserted for %s", stale).isEmpty();
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.OutsideClaimWindow.class);
    RunOutcome.OutsideClaimWindow refused = (RunOutcome.OutsideClaimWindow) outcomes.get(0);
    assertThat(refused.scheduledAt()).isEqualTo(stale);
    assertThat(refused.databaseTime()).isAfter(dbNow);
  }

  @Test
  void anInstanceFortyDaysAheadDoesNotRunATimeThatIsNotDue() {
    String job = "ahead";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock ahead = new MutableClock(dbNow.plus(FORTY_DAYS));

    List<RunOutcome> outcomes;
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(schema.dataSource(), config(job, ahead).build(), ran::add)) {
      outcomes = instance.runDueNow();
    }

    Instant early = DAILY_AT_3.latestAtOrBefore(ahead.instant()).orElseThrow();
    assertThat(ran)
        .as(
            "an instance whose clock is 40 days ahead must not run %s, %s before it is due"
                + " (outcomes: %s)",
            early, Duration.between(dbNow, early), outcomes)
        .isEmpty();
    assertThat(runs.at(job, early)).as("no row inserted for %s", early).isEmpty();
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.OutsideClaimWindow.class);
  }

  @Test
  void negativeControlWithAWindowOfACenturyTheInstanceBehindRunsTheDeletedTimeAgain() {
    String job = "behind-control";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));

    List<RunOutcome> outcomes =
        passADayLater(behind, config(job, behind).claimWindow(ScheduleConfig.MAX_CLAIM_WINDOW));

    Instant stale = DAILY_AT_3.latestAtOrBefore(behind.instant()).orElseThrow();
    assertThat(ran)
        .as("without a useful window the 40-day-old time is claimed and run again: %s", outcomes)
        .singleElement()
        .satisfies(run -> assertThat(run.scheduledAt()).isEqualTo(stale));
    assertThat(runs.at(job, stale)).isPresent();
  }

  @Test
  void negativeControlWithAWindowOfACenturyTheInstanceAheadRunsAFutureTime() {
    String job = "ahead-control";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock ahead = new MutableClock(dbNow.plus(FORTY_DAYS));

    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            config(job, ahead).claimWindow(ScheduleConfig.MAX_CLAIM_WINDOW).build(),
            ran::add)) {
      instance.runDueNow();
    }

    Instant early = DAILY_AT_3.latestAtOrBefore(ahead.instant()).orElseThrow();
    assertThat(ran)
        .singleElement()
        .satisfies(run -> assertThat(run.scheduledAt()).isEqualTo(early));
  }

  @Test
  void theDefaultWindowAdmitsAFullCatchUpOnACorrectClock() {
    String job = "catch-up";
    seedDoneRuns(job, latestDay.minus(Duration.ofDays(60)), latestDay.minus(Duration.ofDays(10)));
    MutableClock correct = new MutableClock(dbNow);

    List<RunOutcome> outcomes;
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            config(job, correct).missedSchedules(MissedSchedules.runEach(10)).build(),
            ran::add)) {
      outcomes = instance.runDueNow();
    }

    assertThat(ran)
        .as(
            "runEach(10) after a 9-day outage runs the 10 days, the oldest 9 days old: %s",
            outcomes)
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(
            java.util.stream.IntStream.rangeClosed(0, 9)
                .mapToObj(i -> latestDay.minus(Duration.ofDays(9 - i)))
                .toArray(Instant[]::new));
  }

  private ScheduleConfig.Builder config(String job, MutableClock clock) {
    return ScheduleConfig.custom(job, DAILY_AT_3).clock(clock);
  }

  /**
   * Starts an instance on {@code clock} (a new job's first pass runs nothing due before its start),
   * moves the clock a day on and runs a pass.
   */
  private List<RunOutcome> passADayLater(MutableClock clock, ScheduleConfig.Builder config) {
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(schema.dataSource(), config.build(), ran::add)) {
      assertThat(instance.runDueNow()).as("nothing due before the instance started").isEmpty();
      clock.advance(Duration.ofDays(1));
      return instance.runDueNow();
    }
  }

  /**
   * Rows a fleet on correct clocks left for the 60 days before {@link #latestDay}; an instance on a
   * correct clock then runs {@link #latestDay} (the window admits it), and the README's retention
   * statement deletes the rows older than 30 days, keeping the newest.
   */
  private void fleetRanSixtyDaysThenRetention(String job) {
    seedDoneRuns(job, latestDay.minus(Duration.ofDays(60)), latestDay.minus(Duration.ofDays(1)));
    MutableClock correct = new MutableClock(dbNow);
    try (ScheduledSingleton a =
        ScheduledSingleton.plain(schema.dataSource(), config(job, correct).build(), ran::add)) {
      assertThat(a.runDueNow())
          .as("the instance on a correct clock runs the latest day")
          .singleElement()
          .isInstanceOf(RunOutcome.Finished.class);
    }
    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(latestDay);
    ran.clear();
    int deleted =
        schema
            .dsl()
            .execute(
                "DELETE FROM nolock_scheduled_runs r WHERE r.job = ? AND r.state <> 'running'"
                    + " AND r.scheduled_at < clock_timestamp() - interval '30 days'"
                    + " AND r.scheduled_at < (SELECT max(scheduled_at) FROM nolock_scheduled_runs"
                    + " m WHERE m.job = r.job)",
                job);
    assertThat(deleted).as("retention deleted the rows older than 30 days").isGreaterThan(25);
  }

  /** Done rows of {@code job}, one per day from {@code first} to {@code last}. */
  private void seedDoneRuns(String job, Instant first, Instant last) {
    schema
        .dsl()
        .execute(
            "INSERT INTO nolock_scheduled_runs (job, scheduled_at, state, attempt, owner,"
                + " covers_from, missed, claimed_at, finished_at) SELECT ?, g, 'done', 1,"
                + " 'fleet#0000000000000000', g, 0, g, g FROM generate_series(CAST(? AS"
                + " timestamptz), CAST(? AS timestamptz), interval '1 day') g",
            job,
            OffsetDateTime.ofInstant(first, ZoneOffset.UTC),
            OffsetDateTime.ofInstant(last, ZoneOffset.UTC));
  }
}
