package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * A finish whose answer was lost: {@code runDueNow()} throws "unknown", and the next pass (the
 * loop's retry) reports the run's true outcome instead of leaving it to a takeover one lease later.
 * A {@link FencedJob}'s {@code COMMIT} applied with its answer lost is {@code Finished}; one lost
 * before PostgreSQL saw it is run again at once with the same attempt (none is spent, also on the
 * last one); a stale attempt's finish stays {@code StaleAttempt}. A {@link PlainJob}'s finish is
 * sent again, never its job. The faults are testkit's {@link JdbcFaults}; the ledgers have no
 * unique key on what they count.
 */
class FinishFaultIT extends FaultFixture {

  /** The finish's {@code UPDATE} (in autocommit for a plain job). */
  private static final Predicate<String> FINISH =
      JdbcFaults.sqlContaining("\"finished_at\" = clock_timestamp()");

  private static ScheduleConfig config(String job, MutableClock clock) {
    return ScheduleConfig.custom(job, DAILY_AT_3)
        .clock(clock)
        .claimWindow(MutableClock.ANY_DATE)
        .lease(LEASE)
        .build();
  }

  @Test
  void aFencedFinishWhoseCommitLandedWhileItsAnswerWasLostIsReportedFinishedByTheNextPass() {
    String job = "commit-answer-lost";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(faults.dataSource(), config(job, clock), FaultFixture::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, JOB_WRITE);

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
        ScheduledSingleton.fenced(faults.dataSource(), config(job, clock), FaultFixture::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostRequest = faults.onNextCommit(FaultKind.REQUEST_LOST, JOB_WRITE);

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
            ScheduleConfig.custom(job, DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .lease(LEASE)
                .maxAttempts(1)
                .build(),
            FaultFixture::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostRequest = faults.onNextCommit(FaultKind.REQUEST_LOST, JOB_WRITE);
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
                schema.dataSource(), config(job, clock), FaultFixture::effect);
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
              RunOutcome.StaleAttempt.class,
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

  /**
   * A plain finish applied with its answer lost, and the run then deleted by retention (another
   * instance ran the next day, the run finished long enough ago) before the next pass asked: before
   * the fix that pass reported {@code StaleAttempt}, a false definite answer (this attempt did
   * finish the run). The control is {@link
   * #aPlainFinishWhoseAnswerWasLostIsReportedByTheNextPassWithoutRunningTheJobAgain()}: the same
   * finish without the purge is {@code Finished}.
   */
  @Test
  void aPlainFinishWhoseAnswerWasLostAndWhoseRunWasPurgedIsNoLongerKnownNotStale() {
    String job = "plain-finish-purged";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(), config(job, clock), run -> effect(run, schema.dsl()))) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault fault = faults.onNextStatement(FaultKind.ANSWER_LOST, FINISH);
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      fault.assertFired();
      purgeTheRunAt(job, THREE_AM);

      assertThat(instance.runDueNow())
          .as("the finish landed; with its row purged, whether it ended the run is unknown")
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.NoLongerKnown.class,
              unknown -> assertThat(unknown.run().attempt().value()).isEqualTo(1));
      assertThat(instance.runDueNow()).as("and only once").isEmpty();
    }
    assertThat(effects(job)).as("the job ran once").containsExactly(1L);
  }

  /**
   * The same for a fenced finish whose {@code COMMIT} landed with its answer lost: the control is
   * {@link #aFencedFinishWhoseCommitLandedWhileItsAnswerWasLostIsReportedFinishedByTheNextPass()}.
   */
  @Test
  void aFencedFinishWhoseCommitAnswerWasLostAndWhoseRunWasPurgedIsNoLongerKnownNotStale() {
    String job = "fenced-finish-purged";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(faults.dataSource(), config(job, clock), FaultFixture::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, JOB_WRITE);
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostAnswer.assertFired();
      purgeTheRunAt(job, THREE_AM);

      assertThat(instance.runDueNow())
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.NoLongerKnown.class,
              unknown -> assertThat(unknown.run().attempt().value()).isEqualTo(1));
    }
    assertThat(effects(job)).as("one effect, the landed commit's").containsExactly(1L);
  }

  /**
   * What retention needs to delete the finished run at {@code time}: a later run of the job
   * (another instance runs the next day), a finish older than the claim window (the row's {@code
   * finished_at} moved back two days, as a run that finished long ago leaves it), then a purge with
   * the shortest window a daily job accepts, a day, by a third instance.
   */
  private void purgeTheRunAt(String job, Instant time) {
    MutableClock nextDay = new MutableClock(time.plus(Duration.ofDays(1)).plusMillis(100));
    try (ScheduledSingleton fleet =
        ScheduledSingleton.plain(schema.dataSource(), config(job, nextDay), run -> {})) {
      assertThat(fleet.runDueNow()).last().isInstanceOf(RunOutcome.Finished.class);
    }
    schema
        .dsl()
        .execute(
            "UPDATE nolock_scheduled_runs SET finished_at = finished_at - interval '2 days'"
                + " WHERE job = ? AND scheduled_at = CAST(? AS timestamptz)",
            job,
            OffsetDateTime.ofInstant(time, ZoneOffset.UTC));
    try (ScheduledSingleton purger =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom(job, DAILY_AT_3).claimWindow(Duration.ofDays(1)).build(),
            run -> {})) {
      assertThat(purger.purgeFinishedRunsOlderThan(Duration.ZERO))
          .as("retention deleted the finished run")
          .isOne();
    }
    assertThat(runs.at(job, time)).isEmpty();
  }
}
