package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link ScheduledSingleton#purgeFinishedRunsOlderThan}: after a purge no scheduled time runs
 * twice, the newest run of each job survives any retention, and a run in flight keeps its row. A
 * daily job on wall clocks set relative to PostgreSQL's {@code clock_timestamp()}; its effects go
 * to a ledger with no unique key, so a time run twice shows as two rows. The negative controls
 * purge with the guards off (the naive "delete what is older than the age") and are caught by the
 * same assertions. A few hundred milliseconds per test.
 */
@ExtendWith(PostgresExtension.class)
class RetentionIT {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");

  /** How many days the fleet ran before the purge, the latest day included. */
  private static final int HISTORY_DAYS = 13;

  /**
   * The claim window of the instances that run: it admits every day of the history, so after the
   * purge only the rows stand between an instance whose clock is behind and a second run.
   */
  private static final Duration WIDE_WINDOW = Duration.ofDays(30);

  private PostgresSchema schema;
  private Runs runs;
  private Instant dbNow;

  /** The latest 03:00 at or before the database's clock: the last day of the history. */
  private Instant latestDay;

  @BeforeAll
  static void createRunsTableAndLedger(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
    s.dsl()
        .execute(
            "CREATE TABLE effect_ledger (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " attempt bigint NOT NULL)"); // no unique key: it counts effects
  }

  @BeforeEach
  void readTheDatabaseClock(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    dbNow = databaseClock();
    latestDay = DAILY_AT_3.latestAtOrBefore(dbNow).get();
  }

  @Test
  void afterAPurgeNoScheduledTimeRunsTwice() {
    String job = "purged";
    long deleted = ranHistoryThenPurgedThenEveryDayAgain(job, UnaryOperator.identity());

    assertEveryScheduledTimeRanOnce(job);
    assertThat(deleted)
        .as("the days older than the default window (7 days) were deleted, the newest kept")
        .isBetween(5L, 6L);
    assertThat(runs.of(job).get(runs.of(job).size() - 1).scheduledAt()).isEqualTo(latestDay);
  }

  @Test
  void negativeControlWithoutTheGuardsAPurgeLetsHandledTimesRunTwice() {
    String job = "purged-naively";
    long deleted =
        ranHistoryThenPurgedThenEveryDayAgain(
            job, ScheduleConfig.Builder::withoutRetentionGuardsForNegativeControl);

    assertThat(deleted).as("the naive purge deleted every row").isEqualTo(HISTORY_DAYS);
    assertThatThrownBy(() -> assertEveryScheduledTimeRanOnce(job))
        .as("the same assertion catches the days run twice")
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("ran twice");
  }

  @Test
  void theNewestRunOfEachJobSurvivesAnyRetention() {
    seedFinishedRuns("old-job", days(60), days(40), "done");
    markFailed("old-job", days(40)); // the newest is kept in whatever state it ended
    seedFinishedRuns("busy-job", days(50), latestDay, "done");
    markRunning("busy-job", days(45)); // a run waiting for a takeover, however old
    List<Instant> bothBefore = scheduledTimes("busy-job");

    for (Duration age : List.of(Duration.ofDays(365), Duration.ofDays(20), Duration.ZERO)) {
      purger("old-job").purgeFinishedRunsOlderThan(age);
      assertThat(scheduledTimes("busy-job"))
          .as("a purge of another job leaves this one's rows alone")
          .isEqualTo(bothBefore);
    }
    for (Duration age : List.of(Duration.ofDays(365), Duration.ofDays(20), Duration.ZERO)) {
      purger("busy-job").purgeFinishedRunsOlderThan(age);
    }

    assertThat(runs.of("old-job"))
        .as("a job whose runs are all older than any age keeps its newest, failed, run")
        .extracting(Runs.Row::scheduledAt, Runs.Row::state)
        .containsExactly(org.assertj.core.groups.Tuple.tuple(days(40), "failed"));
    Duration window = purger("busy-job").config().claimWindow();
    assertThat(scheduledTimes("busy-job"))
        .as(
            "the running row, the newest and every run inside the claim window (%s) are kept",
            window)
        .containsExactlyElementsOf(
            bothBefore.stream()
                .filter(t -> t.equals(days(45)) || !t.isBefore(dbNow.minus(window)))
                .toList());
    assertThat(scheduledTimes("busy-job")).last().isEqualTo(latestDay);
  }

  @Test
  void aPurgeWhileARunIsInFlightKeepsTheRowItFinishes() throws Exception {
    assertThat(purgeDuringATakenOverRun("in-flight", UnaryOperator.identity()))
        .as("the run taken over finishes while a purge ran beside it")
        .isInstanceOf(RunOutcome.Finished.class);
    assertThat(effectsAt("in-flight", days(100))).as("its effect committed once").isEqualTo(1);
  }

  @Test
  void negativeControlWithoutTheGuardsAPurgeDeletesTheRowOfARunInFlight() throws Exception {
    RunOutcome outcome =
        purgeDuringATakenOverRun(
            "in-flight-naive", ScheduleConfig.Builder::withoutRetentionGuardsForNegativeControl);
    assertThat(outcome)
        .as("its row gone, the run's finish matches nothing and its writes roll back")
        .isInstanceOf(RunOutcome.StaleAttempt.class);
    assertThat(effectsAt("in-flight-naive", days(100))).isZero();
  }

  @Test
  void theAgeIsValidatedAtTheApiEdge() {
    ScheduledSingleton instance = purger("validated");
    assertThatThrownBy(() -> instance.purgeFinishedRunsOlderThan(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Duration.ofDays(30)");
    assertThatThrownBy(() -> instance.purgeFinishedRunsOlderThan(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("from Duration.ZERO to 36500 days");
    assertThatThrownBy(() -> instance.purgeFinishedRunsOlderThan(Duration.ofDays(36_501)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("got PT876024H");
  }

  /**
   * A fleet ran the job on each of the {@value #HISTORY_DAYS} days up to {@link #latestDay} (one
   * fenced instance, its wall clock stepped a day at a time, each run finished on its day); an
   * instance with the default window then purges everything it may ({@code Duration.ZERO}); then,
   * for every day of the history, an instance whose clock is behind at that day runs a pass, and
   * one on a correct clock runs one. Returns what the purge deleted.
   */
  private long ranHistoryThenPurgedThenEveryDayAgain(
      String job, UnaryOperator<ScheduleConfig.Builder> control) {
    List<Instant> history = new ArrayList<>();
    for (int d = HISTORY_DAYS - 1; d >= 0; d--) {
      history.add(days(d));
    }
    MutableClock fleetClock = new MutableClock(history.get(0).minus(Duration.ofHours(1)));
    try (ScheduledSingleton fleet = fenced(job, fleetClock)) {
      assertThat(fleet.runDueNow()).as("nothing due before the fleet started").isEmpty();
      for (Instant day : history) {
        fleetClock.set(day.plusSeconds(1));
        assertThat(fleet.runDueNow())
            .as("the fleet runs %s", day)
            .singleElement()
            .isInstanceOf(RunOutcome.Finished.class);
      }
    }
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET finished_at = scheduled_at + interval '1 minute'"
                + " WHERE job = ?",
            job); // as a fleet that ran each day on its day leaves them

    long deleted;
    try (ScheduledSingleton purger =
        ScheduledSingleton.plain(
            schema.dataSource(),
            control.apply(ScheduleConfig.custom(job, DAILY_AT_3)).build(),
            r -> {})) {
      deleted = purger.purgeFinishedRunsOlderThan(Duration.ZERO);
    }

    for (Instant day : history) {
      MutableClock behind = new MutableClock(day.minus(Duration.ofHours(1)));
      try (ScheduledSingleton late = fenced(job, behind)) {
        late.runDueNow(); // the day before, unless the table is empty (then nothing is due yet)
        behind.set(day.plusSeconds(1));
        late.runDueNow();
      }
    }
    try (ScheduledSingleton correct = fenced(job, new MutableClock(dbNow))) {
      correct.runDueNow();
    }
    return deleted;
  }

  /** One ledger row per day of the history, none twice. */
  private void assertEveryScheduledTimeRanOnce(String job) {
    List<Instant> twice =
        schema
            .dsl()
            .resultQuery(
                "SELECT scheduled_at FROM effect_ledger WHERE job = ? GROUP BY scheduled_at"
                    + " HAVING count(*) > 1 ORDER BY scheduled_at",
                job)
            .fetch(r -> r.get(0, OffsetDateTime.class).toInstant());
    assertThat(twice).as("scheduled times of %s that ran twice", job).isEmpty();
    assertThat(
            schema
                .dsl()
                .resultQuery("SELECT count(*) FROM effect_ledger WHERE job = ?", job)
                .fetchOne(0, Long.class))
        .as("one effect per day of the history")
        .isEqualTo(HISTORY_DAYS);
  }

  /**
   * A run of {@code days(100)} whose instance crashed (its lease ended) lies below the job's later,
   * finished days; a fenced instance takes it over, and while its job runs, a purge of age zero
   * deletes everything it may. Returns the taken-over run's outcome.
   */
  private RunOutcome purgeDuringATakenOverRun(
      String job, UnaryOperator<ScheduleConfig.Builder> control) throws Exception {
    Instant ancient = days(100);
    seedFinishedRuns(job, ancient, ancient, "done");
    markRunning(job, ancient);
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET locked_until = clock_timestamp() - interval '1"
                + " second' WHERE job = ?",
            job);
    seedFinishedRuns(job, days(90), days(1), "done");
    CountDownLatch inJob = new CountDownLatch(1);
    CountDownLatch purged = new CountDownLatch(1);
    ScheduleConfig config =
        ScheduleConfig.custom(job, DAILY_AT_3).clock(new MutableClock(dbNow)).build();
    try (ScheduledSingleton instance =
            ScheduledSingleton.fenced(
                schema.dataSource(),
                config,
                (run, tx) -> {
                  record(run, tx);
                  inJob.countDown();
                  assertThat(purged.await(30, TimeUnit.SECONDS)).isTrue();
                });
        ScheduledSingleton purger =
            ScheduledSingleton.plain(
                schema.dataSource(),
                control.apply(ScheduleConfig.custom(job, DAILY_AT_3)).build(),
                r -> {})) {
      CompletableFuture<List<RunOutcome>> pass = CompletableFuture.supplyAsync(instance::runDueNow);
      assertThat(inJob.await(30, TimeUnit.SECONDS)).as("the taken-over run's job started").isTrue();
      long deleted = purger.purgeFinishedRunsOlderThan(Duration.ZERO);
      assertThat(deleted).as("the purge deleted the old finished days").isPositive();
      purged.countDown();
      List<RunOutcome> outcomes = pass.get(30, TimeUnit.SECONDS);
      return outcomes.stream()
          .filter(o -> o.scheduledAt().equals(ancient))
          .findFirst()
          .orElseThrow(() -> new AssertionError("no outcome for " + ancient + ": " + outcomes));
    }
  }

  private ScheduledSingleton fenced(String job, MutableClock clock) {
    return ScheduledSingleton.fenced(
        schema.dataSource(),
        ScheduleConfig.custom(job, DAILY_AT_3).clock(clock).claimWindow(WIDE_WINDOW).build(),
        RetentionIT::record);
  }

  /** An instance of {@code job} with the default configuration, used only to purge. */
  private ScheduledSingleton purger(String job) {
    return ScheduledSingleton.plain(
        schema.dataSource(), ScheduleConfig.custom(job, DAILY_AT_3).build(), r -> {});
  }

  /** The job's effect: one ledger row for the run's attempt, in the finishing transaction. */
  private static void record(ScheduledRun run, DSLContext tx) {
    tx.execute(
        "INSERT INTO effect_ledger (job, scheduled_at, attempt) VALUES (?, CAST(? AS timestamptz),"
            + " ?)",
        run.job(),
        at(run.scheduledAt()),
        run.attempt().value());
  }

  private long effectsAt(String job, Instant t) {
    return schema
        .dsl()
        .resultQuery(
            "SELECT count(*) FROM effect_ledger WHERE job = ? AND scheduled_at = CAST(? AS"
                + " timestamptz)",
            job,
            at(t))
        .fetchOne(0, Long.class);
  }

  /** {@link #latestDay} minus {@code n} days. */
  private Instant days(int n) {
    return latestDay.minus(Duration.ofDays(n));
  }

  private List<Instant> scheduledTimes(String job) {
    return runs.of(job).stream().map(Runs.Row::scheduledAt).toList();
  }

  /**
   * Finished rows of {@code job}, one a day from {@code first} to {@code last}, each on its day.
   */
  private void seedFinishedRuns(String job, Instant first, Instant last, String state) {
    for (Instant t = first; !t.isAfter(last); t = t.plus(Duration.ofDays(1))) {
      schema
          .dsl()
          .execute(
              "INSERT INTO nolock_scheduled_runs (job, scheduled_at, state, attempt, owner,"
                  + " covers_from, missed, claimed_at, finished_at) VALUES (?, CAST(? AS"
                  + " timestamptz), ?, 1, 'fleet#0000000000000000', CAST(? AS timestamptz), 0,"
                  + " CAST(? AS timestamptz), CAST(? AS timestamptz))",
              job,
              at(t),
              state,
              at(t),
              at(t),
              at(t.plusSeconds(60)));
    }
  }

  private void markFailed(String job, Instant t) {
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET state = 'failed', last_error = 'gave up' WHERE job"
                + " = ? AND scheduled_at = CAST(? AS timestamptz)",
            job,
            at(t));
  }

  /** A run whose lease is still held, as a live instance leaves it. */
  private void markRunning(String job, Instant t) {
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET state = 'running', finished_at = NULL, locked_until"
                + " = clock_timestamp() + interval '1 hour' WHERE job = ? AND scheduled_at ="
                + " CAST(? AS timestamptz)",
            job,
            at(t));
  }

  private Instant databaseClock() {
    return schema
        .dsl()
        .resultQuery("SELECT clock_timestamp()")
        .fetchOne(0, OffsetDateTime.class)
        .toInstant();
  }

  private static OffsetDateTime at(Instant t) {
    return OffsetDateTime.ofInstant(t, ZoneOffset.UTC);
  }
}
