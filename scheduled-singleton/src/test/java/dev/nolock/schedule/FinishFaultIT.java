package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A finish whose answer was lost: {@code runDueNow()} throws "unknown", and the next pass (the
 * loop's retry) reports the run's true outcome instead of leaving it to a takeover one lease later.
 * A {@link FencedJob}'s {@code COMMIT} applied with its answer lost is {@code Finished}; one lost
 * before PostgreSQL saw it is run again at once with the same attempt (none is spent, also on the
 * last one); a stale attempt's finish stays {@code StaleFinish}. A {@link PlainJob}'s finish is
 * sent again, never its job. The faults are testkit's {@link JdbcFaults}; the ledgers have no
 * unique key on what they count.
 */
@ExtendWith(PostgresExtension.class)
class FinishFaultIT {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  private static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");

  /** Ten minutes: a run left to its lease would not run again within the test. */
  private static final Duration LEASE = Duration.ofMinutes(10);

  /** The finish's {@code UPDATE} (in autocommit for a plain job). */
  private static final Predicate<String> FINISH =
      JdbcFaults.sqlContaining("\"finished_at\" = clock_timestamp()");

  private static PostgresSchema schema;
  private static Runs runs;

  private JdbcFaults faults;

  @BeforeAll
  static void createTables(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
    s.dsl()
        .execute(
            "CREATE TABLE finish_ledger (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " attempt bigint NOT NULL)"); // no unique key: it counts effects
  }

  @BeforeEach
  void pool() {
    faults = JdbcFaults.pool(schema.jdbcUrl());
  }

  @AfterEach
  void closePool() {
    faults.close();
  }

  private static ScheduleConfig config(String job, MutableClock clock) {
    return ScheduleConfig.custom(job, DAILY_AT_3).clock(clock).lease(LEASE).build();
  }

  private static void effect(ScheduledRun run, DSLContext db) {
    db.execute(
        "INSERT INTO finish_ledger (job, scheduled_at, attempt) VALUES (?, CAST(? AS timestamptz),"
            + " ?)",
        run.job(),
        OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
        run.attempt().value());
  }

  private static List<Long> effects(String job) {
    return schema
        .dsl()
        .resultQuery("SELECT attempt FROM finish_ledger WHERE job = ? ORDER BY attempt", job)
        .fetch(0, Long.class);
  }

  @Test
  void aFencedFinishWhoseCommitLandedWhileItsAnswerWasLostIsReportedFinishedByTheNextPass() {
    String job = "commit-answer-lost";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(faults.dataSource(), config(job, clock), FinishFaultIT::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST);

      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("is unknown");
      lostAnswer.assertFired();

      assertThat(instance.runDueNow())
          .as("the pass after the unknown finish reports its true outcome: attempt 1 finished")
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.Finished.class,
              finished -> assertThat(finished.run().attempt().value()).isEqualTo(1));
      assertThat(instance.runDueNow()).as("and only once").isEmpty();
    }
    assertThat(effects(job)).as("one effect, the landed commit's").containsExactly(1L);
  }

  @Test
  void aFencedFinishWhoseCommitWasLostOnTheWayRunsAgainAtTheNextPassNotALeaseLater() {
    String job = "commit-request-lost";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(faults.dataSource(), config(job, clock), FinishFaultIT::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostRequest = faults.onNextCommit(FaultKind.REQUEST_LOST);

      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostRequest.assertFired();
      assertThat(effects(job)).as("the transaction rolled back").isEmpty();

      assertThat(instance.runDueNow())
          .as(
              "the pass after the unknown finish runs the time again, not a lease (10 min) later,"
                  + " with the same attempt: the lost COMMIT spent none")
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.Finished.class,
              finished -> assertThat(finished.run().attempt().value()).isEqualTo(1));
    }
    assertThat(effects(job)).as("one effect, the attempt's run again").containsExactly(1L);
    assertThat(runs.at(job, THREE_AM))
        .hasValueSatisfying(row -> assertThat(row.state()).isEqualTo("done"));
  }

  /**
   * The same on the run's last attempt: the attempt was not used up (no job threw, no instance
   * crashed), so the run must not be given up as if its lease had expired unfinished.
   */
  @Test
  void aFencedCommitLostOnTheWayOnTheLastAttemptRunsAgainNotGivenUp() {
    String job = "commit-lost-last-attempt";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(
            faults.dataSource(),
            ScheduleConfig.custom(job, DAILY_AT_3).clock(clock).lease(LEASE).maxAttempts(1).build(),
            FinishFaultIT::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostRequest = faults.onNextCommit(FaultKind.REQUEST_LOST);
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostRequest.assertFired();
      assertThat(effects(job)).as("the transaction rolled back").isEmpty();

      List<RunOutcome> next = instance.runDueNow();

      assertThat(effects(job))
          .as(
              "the job's writes, whose COMMIT never reached PostgreSQL, are made once by the run"
                  + " again (no job threw, no instance crashed); the next pass said %s and the row"
                  + " is %s",
              next, runs.at(job, THREE_AM))
          .hasSize(1);
      assertThat(next)
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.Finished.class,
              finished -> assertThat(finished.run().attempt().value()).isEqualTo(1));
    }
    assertThat(runs.at(job, THREE_AM))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).as("the attempt was not spent").isEqualTo(1);
            });
  }

  @Test
  void aStaleFencedFinishWhoseAnswerWasLostIsReportedStaleByTheNextPass() {
    String job = "stale-answer-lost";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton takeover =
            ScheduledSingleton.fenced(
                schema.dataSource(), config(job, clock), FinishFaultIT::effect);
        ScheduledSingleton paused =
            ScheduledSingleton.fenced(
                faults.dataSource(),
                config(job, clock),
                (run, tx) -> {
                  effect(run, tx);
                  // Paused past the lease: another instance takes the run over and finishes it.
                  runs.expireLease(job, run.scheduledAt());
                  assertThat(takeover.runDueNow()).first().isInstanceOf(RunOutcome.Finished.class);
                  armed.add(faults.onNextStatement(FaultKind.ANSWER_LOST, FINISH));
                })) {
      clock.set(THREE_AM.plusMillis(100));

      assertThatThrownBy(paused::runDueNow).isInstanceOf(BackendUnavailableException.class);
      assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);

      assertThat(paused.runDueNow())
          .as("the pass after the unknown finish of the stale attempt reports it stale")
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.StaleFinish.class,
              stale -> assertThat(stale.run().attempt().value()).isEqualTo(1));
    }
    assertThat(effects(job)).as("one effect, the takeover's").containsExactly(2L);
  }

  @Test
  void aPlainFinishWhoseAnswerWasLostIsReportedByTheNextPassWithoutRunningTheJobAgain() {
    plainFinishLost(FaultKind.ANSWER_LOST);
  }

  @Test
  void aPlainFinishLostOnTheWayIsSentAgainByTheNextPassWithoutRunningTheJobAgain() {
    plainFinishLost(FaultKind.REQUEST_LOST);
  }

  private void plainFinishLost(FaultKind kind) {
    String job = "plain-finish-" + kind;
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            config(job, clock),
            run -> effect(run, schema.dsl()))) { // a foreign effect: not in the finish's commit
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault fault = faults.onNextStatement(kind, FINISH);

      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      fault.assertFired();

      assertThat(instance.runDueNow())
          .as("%s: the pass after the unknown finish reports attempt 1 finished", kind)
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.Finished.class,
              finished -> assertThat(finished.run().attempt().value()).isEqualTo(1));
    }
    assertThat(effects(job)).as("%s: the job ran once", kind).containsExactly(1L);
    assertThat(runs.at(job, THREE_AM))
        .hasValueSatisfying(row -> assertThat(row.state()).isEqualTo("done"));
  }
}
