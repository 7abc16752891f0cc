package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
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
  private static final CronSchedule EVERY_SECOND = CronSchedule.quartz("* * * * * ?");
  private static final CronSchedule MONTHLY = CronSchedule.unix("0 0 1 * *");

  private PostgresSchema schema;
  private Runs runs;
  private Instant dbNow;

  /** The latest 03:00 at or before the database's clock: the day instance A runs. */
  private Instant latestDay;

  /** The latest first of the month, 00:00, at or before the database's clock. */
  private Instant latestMonth;

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
    dbNow = databaseClock();
    latestDay = DAILY_AT_3.latestAtOrBefore(dbNow).get();
    latestMonth = MONTHLY.latestAtOrBefore(dbNow).get();
  }

  @Test
  void anInstanceFortyDaysBehindDoesNotRunAgainATimeWhoseRowRetentionDeleted() {
    String job = "behind";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));

    List<RunOutcome> outcomes = passAfter(behind, Duration.ofDays(1), config(job, behind));

    Instant stale = DAILY_AT_3.latestAtOrBefore(behind.instant()).get();
    assertThat(ran)
        .as(
            "an instance whose clock is 40 days behind must not run %s again: it ran %s ago and"
                + " retention deleted its row (outcomes: %s)",
            stale, Duration.between(stale, dbNow), outcomes)
        .isEmpty();
    assertThat(runs.at(job, stale)).as("no row inserted for %s", stale).isEmpty();
    assertThat(outcomes)
        .as("retention kept the newest row, %s, which supersedes %s", latestDay, stale)
        .containsExactly(new RunOutcome.Superseded(stale, latestDay));
  }

  @Test
  void anInstanceFortyDaysAheadDoesNotRunATimeThatIsNotDue() {
    String job = "ahead";
    fleetRanSixtyDaysThenRetention(job);
    MutableClock ahead = new MutableClock(dbNow.plus(FORTY_DAYS));

    List<RunOutcome> outcomes = onePass(config(job, ahead).build());

    Instant early = DAILY_AT_3.latestAtOrBefore(ahead.instant()).get();
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
  void anInstanceFortyDaysBehindOnAJobWithNoRowsIsRefusedByTheWindow() {
    String job = "behind-no-rows";
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));

    List<RunOutcome> outcomes = passAfter(behind, Duration.ofDays(1), config(job, behind));

    Instant stale = DAILY_AT_3.latestAtOrBefore(behind.instant()).get();
    assertThat(ran).as("outcomes: %s", outcomes).isEmpty();
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.OutsideClaimWindow.class);
    RunOutcome.OutsideClaimWindow refused = (RunOutcome.OutsideClaimWindow) outcomes.get(0);
    assertThat(refused.scheduledAt()).isEqualTo(stale);
    assertThat(refused.databaseTime()).isAfter(dbNow);
  }

  @Test
  void negativeControlWithAWindowOfACenturyTheInstanceBehindRunsAFortyDayOldTime() {
    String job = "behind-control";
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));

    List<RunOutcome> outcomes =
        passAfter(
            behind,
            Duration.ofDays(1),
            config(job, behind).claimWindow(ScheduleConfig.MAX_CLAIM_WINDOW));

    Instant stale = DAILY_AT_3.latestAtOrBefore(behind.instant()).get();
    assertThat(ran)
        .as("without a useful window the 40-day-old time is claimed and run: %s", outcomes)
        .singleElement()
        .satisfies(run -> assertThat(run.scheduledAt()).isEqualTo(stale));
    assertThat(runs.at(job, stale)).isPresent();
  }

  @Test
  void anInstanceAFewSecondsAheadWithinTheToleranceRuns() {
    String job = "ahead-within";
    MutableClock ahead = new MutableClock(dbNow);

    List<RunOutcome> outcomes =
        passAfter(
            ahead, Duration.ofSeconds(3), ScheduleConfig.custom(job, EVERY_SECOND).clock(ahead));

    assertThat(outcomes)
        .as("3 s ahead, within the default tolerance of %s", ScheduleConfig.DEFAULT_CLOCK_TOLERANCE)
        .filteredOn(RunOutcome.Finished.class::isInstance)
        .hasSize(1);
    assertThat(ran).hasSize(1);
  }

  @Test
  void anInstanceAheadBeyondTheToleranceClaimsTheTimeOnceTheDatabaseClockReachesIt() {
    String job = "ahead-retry";
    MutableClock ahead = new MutableClock(dbNow);
    try (ScheduledSingleton instance =
        instance(
            ScheduleConfig.custom(job, EVERY_SECOND)
                .clock(ahead)
                .clockTolerance(Duration.ZERO)
                .build())) {
      assertThat(instance.runDueNow()).isEmpty();
      ahead.advance(Duration.ofSeconds(3));
      Instant t = EVERY_SECOND.latestAtOrBefore(ahead.instant()).get();

      List<RunOutcome> refused = instance.runDueNow();
      assertThat(refused)
          .as("%s lies ahead of the database's clock", t)
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.OutsideClaimWindow.class, o -> assertThat(o.scheduledAt()).isEqualTo(t));
      assertThat(instance.runDueNow()).as("the refusal is reported once").isEmpty();
      await("the database's clock reaches " + t)
          .atMost(Duration.ofSeconds(30))
          .until(() -> !databaseClock().isBefore(t));

      List<RunOutcome> due = instance.runDueNow();
      assertThat(ran)
          .as("once due by the database's clock, %s runs (outcomes: %s)", t, due)
          .extracting(ScheduledRun::scheduledAt)
          .containsExactly(t);
    }
  }

  @Test
  void negativeControlWithATolerableSkewOfAnHourAnInstanceThreeMinutesAheadRunsEarly() {
    String job = "ahead-control";
    MutableClock ahead = new MutableClock(dbNow);

    List<RunOutcome> outcomes =
        passAfter(
            ahead,
            Duration.ofMinutes(3),
            ScheduleConfig.custom(job, CronSchedule.unix("* * * * *"))
                .clock(ahead)
                .clockTolerance(ScheduleConfig.MAX_CLOCK_TOLERANCE));

    Instant early = CronSchedule.unix("* * * * *").latestAtOrBefore(ahead.instant()).get();
    assertThat(ran)
        .as(
            "with an hour's tolerance the time %s ahead runs now: %s",
            Duration.between(dbNow, early), outcomes)
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(early);
  }

  @Test
  void withTheDefaultToleranceAnInstanceThreeMinutesAheadDoesNotRunEarly() {
    String job = "ahead-minutes";
    MutableClock ahead = new MutableClock(dbNow);

    List<RunOutcome> outcomes =
        passAfter(
            ahead,
            Duration.ofMinutes(3),
            ScheduleConfig.custom(job, CronSchedule.unix("* * * * *")).clock(ahead));

    assertThat(ran).as("outcomes: %s", outcomes).isEmpty();
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.OutsideClaimWindow.class);
  }

  private Instant databaseClock() {
    return schema
        .dsl()
        .resultQuery("SELECT clock_timestamp()")
        .fetchOne(0, OffsetDateTime.class)
        .toInstant();
  }

  @Test
  void theDefaultWindowAdmitsAFullCatchUpOnACorrectClock() {
    String job = "catch-up";
    seedDoneRuns(job, latestDay.minus(Duration.ofDays(60)), latestDay.minus(Duration.ofDays(10)));
    MutableClock correct = new MutableClock(dbNow);

    List<RunOutcome> outcomes =
        onePass(config(job, correct).missedSchedules(MissedSchedules.runEach(10)).build());

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

  @Test
  void aMonthlyInstanceFortyDaysAheadDoesNotRunNextMonthsTimeNow() {
    String job = "monthly-ahead";
    seedDoneRuns(job, MONTHLY, latestMonth.minus(Duration.ofDays(120)), latestMonth);
    MutableClock ahead = new MutableClock(dbNow.plus(FORTY_DAYS));

    List<RunOutcome> outcomes = onePass(ScheduleConfig.custom(job, MONTHLY).clock(ahead).build());

    Instant early = MONTHLY.latestAtOrBefore(ahead.instant()).get();
    assertThat(ran)
        .as(
            "a monthly job's instance 40 days ahead must not run %s now, %s before it is due by"
                + " the database's clock (outcomes: %s)",
            early, Duration.between(dbNow, early), outcomes)
        .isEmpty();
    assertThat(runs.at(job, early)).as("no row inserted for %s", early).isEmpty();
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.OutsideClaimWindow.class);
  }

  @Test
  void anInstanceWhoseClockIsFixedAfterARefusedFutureTimeRunsTheTimeDueByTheDatabase() {
    String job = "monthly-fixed";
    Instant previousMonth = MONTHLY.latestBefore(latestMonth).get();
    seedDoneRuns(job, MONTHLY, previousMonth.minus(Duration.ofDays(100)), previousMonth);
    MutableClock clock = new MutableClock(dbNow.plus(Duration.ofDays(100)));

    try (ScheduledSingleton instance =
        instance(ScheduleConfig.custom(job, MONTHLY).clock(clock).build())) {
      List<RunOutcome> ahead = instance.runDueNow();
      assertThat(ran).as("nothing runs 100 days early: %s", ahead).isEmpty();

      clock.set(dbNow); // NTP fixed the clock
      List<RunOutcome> fixed = instance.runDueNow();

      assertThat(ran)
          .as(
              "once its clock is fixed the instance runs %s, due by the database's clock and"
                  + " unclaimed; a refused future time must not count as handled (outcomes: %s,"
                  + " then %s)",
              latestMonth, ahead, fixed)
          .extracting(ScheduledRun::scheduledAt)
          .containsExactly(latestMonth);
    }
  }

  @Test
  void aRefusalIsReportedAlthoughTheStatementAfterTheClaimFails() {
    String job = "behind-blip";
    MutableClock behind = new MutableClock(dbNow.minus(FORTY_DAYS));
    List<RunOutcome> outcomes = new ArrayList<>();
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl());
        ScheduledSingleton instance =
            ScheduledSingleton.plain(faults.dataSource(), config(job, behind).build(), ran::add)) {
      assertThat(instance.runDueNow()).as("nothing due before the instance started").isEmpty();
      behind.advance(Duration.ofDays(1));
      // The old claim learnt of a refusal from a read of the database's clock after it.
      faults.onNextStatement(
          FaultKind.REQUEST_LOST,
          sql -> {
            String lower = sql.toLowerCase(java.util.Locale.ROOT);
            return lower.contains("clock_timestamp()")
                && !lower.contains("insert")
                && !lower.contains(" from ");
          });
      for (int pass = 0; pass < 3; pass++) {
        try {
          outcomes.addAll(instance.runDueNow());
        } catch (BackendUnavailableException e) {
          // the next pass reports what this one found
        }
      }
    }

    assertThat(ran).isEmpty();
    assertThat(outcomes)
        .as("the refusal of the 40-day-old time is reported once, whatever failed after it")
        .filteredOn(RunOutcome.OutsideClaimWindow.class::isInstance)
        .hasSize(1);
  }

  @Test
  void anInstanceBehindWithinTheWindowDoesNotRunAgainATimeRetentionDeleted() {
    String job = "monthly-behind";
    Instant previousMonth = MONTHLY.latestBefore(latestMonth).get();
    seedDoneRuns(job, MONTHLY, previousMonth.minus(Duration.ofDays(100)), latestMonth);
    // Retention keeps 10 days and the newest row: the previous month's row is gone.
    schema.dsl().execute(readmeRetention().replace("30 days", "10 days"));
    assertThat(runs.at(job, previousMonth)).as("retention deleted %s", previousMonth).isEmpty();
    assertThat(runs.at(job, latestMonth)).as("retention kept the newest row").isPresent();
    MutableClock behind = new MutableClock(previousMonth.minus(Duration.ofHours(1)));

    List<RunOutcome> outcomes =
        passAfter(behind, Duration.ofHours(2), ScheduleConfig.custom(job, MONTHLY).clock(behind));

    assertThat(ran)
        .as(
            "an instance whose clock is behind must not run %s again: the job's row of %s is"
                + " newer, so %s was handled and retention deleted its row (it lies %s back, inside"
                + " the default window %s) (outcomes: %s)",
            previousMonth,
            latestMonth,
            previousMonth,
            Duration.between(previousMonth, dbNow),
            ScheduleConfig.custom(job, MONTHLY).build().claimWindow(),
            outcomes)
        .isEmpty();
    assertThat(runs.at(job, previousMonth)).as("no row inserted again").isEmpty();
    assertThat(outcomes).containsExactly(new RunOutcome.Superseded(previousMonth, latestMonth));
  }

  @Test
  void theReadmeRetentionKeepsTheNewestRowOfEachJobAndRunningRows() {
    seedDoneRuns(
        "kept-a",
        DAILY_AT_3,
        latestDay.minus(Duration.ofDays(90)),
        latestDay.minus(Duration.ofDays(60)));
    seedDoneRuns("kept-b", DAILY_AT_3, latestDay.minus(Duration.ofDays(40)), latestDay);
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET state = 'running', locked_until = clock_timestamp()"
                + " WHERE job = 'kept-b' AND scheduled_at = CAST(? AS timestamptz)",
            OffsetDateTime.ofInstant(latestDay.minus(Duration.ofDays(39)), ZoneOffset.UTC));

    schema.dsl().execute(readmeRetention());

    assertThat(runs.of("kept-a"))
        .as("the newest row of a job is kept, however old")
        .extracting(Runs.Row::scheduledAt)
        .containsExactly(latestDay.minus(Duration.ofDays(60)));
    assertThat(runs.of("kept-b"))
        .as("a running row is kept; done rows older than 30 days are deleted")
        .extracting(Runs.Row::scheduledAt)
        .first()
        .isEqualTo(latestDay.minus(Duration.ofDays(39)));
    assertThat(runs.of("kept-b")).extracting(Runs.Row::scheduledAt).contains(latestDay);
  }

  @Test
  void aCrashedRunOlderThanTheClaimWindowIsStillTakenOverAndRun() {
    String job = "ancient-running";
    Instant ancient = latestDay.minus(Duration.ofDays(100));
    seedDoneRuns(job, DAILY_AT_3, ancient, ancient);
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET state = 'running', locked_until = CAST(? AS"
                + " timestamptz) WHERE job = ?",
            OffsetDateTime.ofInstant(ancient.plusSeconds(30), ZoneOffset.UTC),
            job);
    MutableClock correct = new MutableClock(dbNow);

    ScheduleConfig config = config(job, correct).build();
    List<RunOutcome> outcomes = onePass(config);

    assertThat(ran)
        .as(
            "a run of %s whose instance crashed, %s old (the claim window is %s), is retried"
                + " whatever its age (outcomes: %s)",
            ancient, Duration.between(ancient, dbNow), config.claimWindow(), outcomes)
        .filteredOn(run -> run.scheduledAt().equals(ancient))
        .singleElement()
        .satisfies(run -> assertThat(run.attempt().value()).isEqualTo(2));
    assertThat(runs.at(job, ancient).orElseThrow().state()).isEqualTo("done");
  }

  @Test
  void anInstanceAheadByMoreThanToleranceAndAPeriodRunsTheRefusedTimeAndTheNextOnes() {
    String job = "ahead-moving";
    // A real, moving wall clock 2 s ahead of this host's (and so of the local database's); no
    // tolerance: every time is refused once, 2 s (two periods) before the database reaches it.
    java.time.Clock ahead =
        java.time.Clock.offset(java.time.Clock.systemUTC(), Duration.ofSeconds(2));
    try (ScheduledSingleton instance =
        instance(
            ScheduleConfig.custom(job, EVERY_SECOND)
                .clock(ahead)
                .clockTolerance(Duration.ZERO)
                .build())) {
      Instant started = EVERY_SECOND.latestAtOrBefore(ahead.instant()).get();
      assertThat(instance.runDueNow()).as("nothing due before the instance started").isEmpty();
      await("the wall clock moves past " + started)
          .atMost(Duration.ofSeconds(30))
          .until(() -> EVERY_SECOND.latestAtOrBefore(ahead.instant()).get().isAfter(started));

      List<Instant> refused = new ArrayList<>();
      List<RunOutcome> all = new ArrayList<>();
      for (int round = 0; round < 2; round++) {
        List<RunOutcome> first = instance.runDueNow();
        all.addAll(first);
        assertThat(first)
            .as("round %d: the time due by the wall clock lies ahead of the database's", round)
            .singleElement()
            .isInstanceOf(RunOutcome.OutsideClaimWindow.class);
        Instant t = ((RunOutcome.OutsideClaimWindow) first.get(0)).scheduledAt();
        refused.add(t);
        await("the database's clock reaches " + t)
            .atMost(Duration.ofSeconds(30))
            .until(() -> !databaseClock().isBefore(t));
        all.addAll(instance.runDueNow());
        assertThat(ran)
            .as(
                "round %d: once due by the database's clock the refused %s runs, though the wall"
                    + " clock is by then %s ahead of it (outcomes: %s)",
                round, t, Duration.ofSeconds(2), all)
            .extracting(ScheduledRun::scheduledAt)
            .containsExactlyElementsOf(refused);
      }
    }
  }

  /** The retention statement of the README (its {@code DELETE ... ;} block). */
  private static String readmeRetention() {
    try {
      String readme = Files.readString(Path.of("README.md"));
      Matcher m =
          Pattern.compile("(?s)```sql\\s*(DELETE FROM nolock_scheduled_runs.*?);\\s*```")
              .matcher(readme);
      assertThat(m.find()).as("the README's retention DELETE").isTrue();
      return m.group(1);
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /** An instance on {@code config} whose runs {@link #ran} records. */
  private ScheduledSingleton instance(ScheduleConfig config) {
    return ScheduledSingleton.plain(schema.dataSource(), config, ran::add);
  }

  /** Starts an instance on {@code config}, runs one pass and closes it. */
  private List<RunOutcome> onePass(ScheduleConfig config) {
    try (ScheduledSingleton instance = instance(config)) {
      return instance.runDueNow();
    }
  }

  /**
   * Starts an instance on {@code clock} (a new job's first pass runs nothing due before its start),
   * moves the clock {@code by} on and runs a pass.
   */
  private List<RunOutcome> passAfter(
      MutableClock clock, Duration by, ScheduleConfig.Builder config) {
    try (ScheduledSingleton instance = instance(config.build())) {
      assertThat(instance.runDueNow()).as("nothing due before the instance started").isEmpty();
      clock.advance(by);
      return instance.runDueNow();
    }
  }

  private ScheduleConfig.Builder config(String job, MutableClock clock) {
    return ScheduleConfig.custom(job, DAILY_AT_3).clock(clock);
  }

  /**
   * Rows a fleet on correct clocks left for the 60 days before {@link #latestDay}; an instance on a
   * correct clock then runs {@link #latestDay} (the window admits it), and the README's retention
   * statement deletes the rows older than 30 days, keeping the newest.
   */
  private void fleetRanSixtyDaysThenRetention(String job) {
    seedDoneRuns(job, latestDay.minus(Duration.ofDays(60)), latestDay.minus(Duration.ofDays(1)));
    MutableClock correct = new MutableClock(dbNow);
    try (ScheduledSingleton a = instance(config(job, correct).build())) {
      assertThat(a.runDueNow())
          .as("the instance on a correct clock runs the latest day")
          .singleElement()
          .isInstanceOf(RunOutcome.Finished.class);
    }
    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(latestDay);
    ran.clear();
    int before = runs.of(job).size();
    schema.dsl().execute(readmeRetention());
    assertThat(before - runs.of(job).size())
        .as("retention deleted the rows older than 30 days")
        .isGreaterThan(25);
  }

  /** Done rows of {@code job}, one per day from {@code first} to {@code last}. */
  private void seedDoneRuns(String job, Instant first, Instant last) {
    seedDoneRuns(job, DAILY_AT_3, first, last);
  }

  /**
   * Done rows of {@code job}, one per time of {@code schedule} from {@code first} to {@code last}.
   */
  private void seedDoneRuns(String job, CronSchedule schedule, Instant first, Instant last) {
    for (Instant t = schedule.nextAfter(first.minusSeconds(1)).get();
        !t.isAfter(last);
        t = schedule.nextAfter(t).get()) {
      schema
          .dsl()
          .execute(
              "INSERT INTO nolock_scheduled_runs (job, scheduled_at, state, attempt, owner,"
                  + " covers_from, missed, claimed_at, finished_at) VALUES (?, CAST(? AS"
                  + " timestamptz), 'done', 1, 'fleet#0000000000000000', CAST(? AS timestamptz), 0,"
                  + " CAST(? AS timestamptz), CAST(? AS timestamptz))",
              job,
              at(t),
              at(t),
              at(t),
              at(t));
    }
  }

  private static OffsetDateTime at(Instant t) {
    return OffsetDateTime.ofInstant(t, ZoneOffset.UTC);
  }
}
