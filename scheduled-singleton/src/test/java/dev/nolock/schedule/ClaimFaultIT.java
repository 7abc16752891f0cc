package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A scheduled time whose claim met a dropped connection is claimed (or recognised as this
 * instance's) by the next pass, not skipped until the next scheduled time: a time counts as handled
 * only once it was claimed here or lost to another instance. The faults are testkit's {@link
 * JdbcFaults}: the claim's {@code INSERT} lost before PostgreSQL saw it, or its transaction's
 * {@code COMMIT} applied with its answer lost.
 */
class ClaimFaultIT extends FaultFixture {

  @BeforeAll
  static void createRanTable(PostgresSchema s) {
    s.dsl()
        .execute(
            "CREATE TABLE ran (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " instance text NOT NULL)"); // no unique key: it counts runs
  }

  private void ran(String instance, ScheduledRun run) {
    schema
        .dsl()
        .execute(
            "INSERT INTO ran (job, scheduled_at, instance) VALUES (?, CAST(? AS timestamptz), ?)",
            run.job(),
            OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
            instance);
  }

  private List<String> ranBy(String job) {
    return schema
        .dsl()
        .resultQuery("SELECT instance FROM ran WHERE job = ? ORDER BY ctid", job)
        .fetch(0, String.class);
  }

  @Test
  void aDailyRunWhoseClaimWasLostOnADroppedConnectionRunsAtTheNextPassNotTheNextDay() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom("daily", DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault blip = faults.onNextStatement(FaultKind.REQUEST_LOST, CLAIM);

      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + THREE_AM);
      blip.assertFired();
      assertThat(runs.of("daily")).as("PostgreSQL never saw the claim").isEmpty();

      List<RunOutcome> retried = instance.runDueNow();

      assertThat(ran)
          .as("the 03:00 run whose claim was lost on a dropped connection runs at the next pass")
          .extracting(ScheduledRun::scheduledAt)
          .containsExactly(THREE_AM);
      assertThat(retried).singleElement().isInstanceOf(RunOutcome.Finished.class);
      assertThat(instance.runDueNow()).as("and once: the time is handled now").isEmpty();
    }
    assertThat(runs.of("daily"))
        .singleElement()
        .satisfies(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).isEqualTo(1);
            });
  }

  @Test
  void aClaimThatLandedWhileItsAnswerWasLostIsThisInstancesAndRunsAtTheNextPass() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom("daily-answer-lost", DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM);

      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + THREE_AM);
      lostAnswer.assertFired();
      assertThat(runs.of("daily-answer-lost"))
          .as("the claim landed")
          .singleElement()
          .satisfies(row -> assertThat(row.state()).isEqualTo("running"));

      List<RunOutcome> retried = instance.runDueNow();

      assertThat(retried)
          .as("the claim that landed is this instance's, not one lost to another instance")
          .singleElement()
          .isInstanceOf(RunOutcome.Finished.class);
      assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(THREE_AM);
      assertThat(instance.runDueNow()).isEmpty();
    }
    assertThat(runs.of("daily-answer-lost"))
        .singleElement()
        .satisfies(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).as("run by the attempt that claimed it").isEqualTo(1);
            });
  }

  @Test
  void anotherInstancesClaimIsStillALostClaim() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                faults.dataSource(),
                ScheduleConfig.custom("daily-two", DAILY_AT_3)
                    .clock(clock)
                    .claimWindow(MutableClock.ANY_DATE)
                    .owner("a")
                    .build(),
                ran::add);
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                faults.dataSource(),
                ScheduleConfig.custom("daily-two", DAILY_AT_3)
                    .clock(clock)
                    .claimWindow(MutableClock.ANY_DATE)
                    .owner("b")
                    .build(),
                ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM);
      assertThatThrownBy(a::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostAnswer.assertFired();

      assertThat(b.runDueNow()).containsExactly(new RunOutcome.LostClaim(THREE_AM));
      assertThat(a.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);
      assertThat(ran).extracting(ScheduledRun::owner).containsExactly(a.identity());
    }
    assertThat(ran.get(0).owner()).startsWith("a#");
  }

  /**
   * Owners are set by hand (a service name, a pod template), so two live instances can share one.
   * The claim that landed while its answer was lost must still be resumed only by the instance that
   * sent it: the identity stored in a claim is the configured owner plus a nonce per instance.
   */
  @Test
  void twoInstancesConfiguredWithOneOwnerDoNotBothRunATimeWhoseClaimAnswerWasLost() {
    String job = "daily-one-owner";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    ScheduleConfig config =
        ScheduleConfig.custom(job, DAILY_AT_3)
            .clock(clock)
            .claimWindow(MutableClock.ANY_DATE)
            .owner("billing-service")
            .build();
    List<RunOutcome> heardByB;
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(faults.dataSource(), config, run -> ran("a", run));
        // b's job overlaps a's retry, as a long job and a loop retrying within its backoff do.
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                faults.dataSource(),
                config,
                run -> {
                  ran("b", run);
                  a.runDueNow();
                })) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM);
      assertThatThrownBy(a::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostAnswer.assertFired();

      heardByB = b.runDueNow();
      a.runDueNow();
    }

    assertThat(ranBy(job))
        .as(
            "03:00 ran once, by the instance whose claim landed, not by every instance"
                + " configured with its owner")
        .containsExactly("a");
    assertThat(heardByB)
        .as("a's claim is a lost claim for b, although both are configured as billing-service")
        .containsExactly(new RunOutcome.LostClaim(THREE_AM));
  }

  @Test
  void theLoopRetriesAPassWhoseClaimWasLostAndRunsTheTimeWithinTheBackoff() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    InjectedFault blip;
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom("daily-loop", DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .onOutcome(outcomes::add)
                .build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      blip = faults.onNextStatement(FaultKind.REQUEST_LOST, CLAIM);
      loop.start();
      // A failed pass is retried after at most 500 ms; without the retry the next wake is 03:00
      // tomorrow.
      await("the 03:00 run after the blip")
          .atMost(Duration.ofSeconds(10))
          .until(() -> !ran.isEmpty());
    }

    blip.assertFired();
    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(THREE_AM);
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
  }

  /**
   * A catch-up (runEach) whose claim of 10:04 landed with its answer lost. The table now holds
   * 10:04, so a pass that took its floor from the table alone would plan 10:05 and 10:06 only and
   * leave 10:04 running under this instance's identity, run by nobody until its lease ran out.
   */
  @Test
  void aCatchUpClaimThatLandedWithItsAnswerLostRunsAtTheNextPassInOrder() {
    String job = "catch-up-answer-lost";
    MutableClock clock = new MutableClock(TEN.plusMillis(100));
    List<Instant> ran = new CopyOnWriteArrayList<>();
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom(job, EVERY_MINUTE)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .missedSchedules(MissedSchedules.runEach(10))
                .build(),
            run -> {
              ran.add(run.scheduledAt());
              if (run.scheduledAt().equals(minute(3)) && armed.isEmpty()) {
                armed.add(faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM));
              }
            })) {
      clock.set(minute(1).plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);

      clock.set(minute(6).plusMillis(100));
      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + minute(4));
      assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);
      assertThat(runs.at(job, minute(4)))
          .as("the claim of 10:04 landed")
          .hasValueSatisfying(row -> assertThat(row.state()).isEqualTo("running"));

      List<RunOutcome> next = instance.runDueNow();

      assertThat(ran)
          .as(
              "after the next pass every minute ran once, in order, 10:04 (whose claim landed"
                  + " with its answer lost) included; the pass said %s",
              next)
          .containsExactly(minute(1), minute(2), minute(3), minute(4), minute(5), minute(6));
      assertThat(next)
          .as(
              "10:02 and 10:03 (run by the pass that failed), 10:04, 10:05 and 10:06 finished"
                  + " here, and nothing was lost to another instance")
          .extracting(RunOutcome::scheduledAt)
          .containsExactly(minute(2), minute(3), minute(4), minute(5), minute(6));
      assertThat(next).allMatch(outcome -> outcome instanceof RunOutcome.Finished);
    }
    assertThat(runs.at(job, minute(4)))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).as("run by the attempt that claimed it").isEqualTo(1);
            });
  }

  /**
   * The same with {@code maxAttempts(1)}: left to its lease, the landed claim would be found by the
   * takeover scan at its last attempt and given up, although no job threw and no instance crashed.
   */
  @Test
  void withOneAttemptACatchUpClaimThatLandedWithItsAnswerLostStillRuns() {
    String job = "catch-up-one-attempt";
    MutableClock clock = new MutableClock(TEN.plusMillis(100));
    List<Instant> ran = new CopyOnWriteArrayList<>();
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    List<RunOutcome> heard = new ArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom(job, EVERY_MINUTE)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .maxAttempts(1)
                .missedSchedules(MissedSchedules.runEach(10))
                .build(),
            run -> {
              ran.add(run.scheduledAt());
              if (run.scheduledAt().equals(minute(3)) && armed.isEmpty()) {
                armed.add(faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM));
              }
            })) {
      clock.set(minute(1).plusMillis(100));
      heard.addAll(instance.runDueNow());
      clock.set(minute(6).plusMillis(100));
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);
      heard.addAll(instance.runDueNow());
      // Whatever is still running under the landed claim: its lease runs out, as it does one
      // lease later without renewals.
      runs.expireLease(job, minute(4));
      heard.addAll(instance.runDueNow());

      assertThat(ran)
          .as(
              "10:04, whose claim landed with its answer lost, runs at some point; the passes"
                  + " said %s",
              heard)
          .contains(minute(4));
      assertThat(heard).noneMatch(outcome -> outcome instanceof RunOutcome.GaveUp);
    }
  }

  /**
   * The database stays unreachable for longer than the lease of a claim that landed with its answer
   * lost: the run is still this instance's attempt 1, which it never ran. The next pass runs that
   * attempt (it does not spend another on a takeover) and reports it once: not also as a time lost
   * to another instance, which would count it skipped too.
   */
  @Test
  void aTimeThisInstanceRanIsNotAlsoReportedAsLostToAnotherInstance() {
    String job = "own-run-not-lost";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom(job, DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .metrics(registry, job)
                .build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, CLAIM);
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostAnswer.assertFired();
      runs.expireLease(job, THREE_AM);

      List<RunOutcome> next = instance.runDueNow();

      assertThat(ran).as("this instance ran 03:00").hasSize(1);
      assertThat(next)
          .as("the pass that ran 03:00 here does not also say another instance claimed it")
          .noneMatch(outcome -> outcome instanceof RunOutcome.LostClaim);
      assertThat(next).singleElement().isInstanceOf(RunOutcome.Finished.class);
      assertThat(ran.get(0).attempt().value())
          .as("run with the attempt its claim was granted: the lost answer spent none")
          .isEqualTo(1);
      assertThat(instance.runDueNow()).isEmpty();
    }
    assertThat(registry.get("nolock.schedule.skipped").counter().count())
        .as("not counted as skipped")
        .isZero();
  }

  @Test
  void aCatchUpWhoseThirdClaimWasLostResumesAtThatTime() {
    Instant ten = Instant.parse("2026-03-10T10:00:00Z");
    Instant fault = ten.plusSeconds(4 * 60);
    MutableClock clock = new MutableClock(ten.plusMillis(100));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom("catch-up", EVERY_MINUTE)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .missedSchedules(MissedSchedules.runEach(10))
                .build(),
            run -> {
              ran.add(run);
              if (run.scheduledAt().equals(fault.minusSeconds(60)) && armed.isEmpty()) {
                // The next claim of the catch-up (10:04) meets the dropped connection.
                armed.add(faults.onNextStatement(FaultKind.REQUEST_LOST, CLAIM));
              }
            })) {
      clock.set(ten.plusSeconds(60).plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);

      // Down from 10:02 to 10:06; the catch-up claims 10:02 to 10:06 in order.
      clock.set(ten.plusSeconds(6 * 60).plusMillis(100));
      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + fault);
      assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);

      instance.runDueNow();
    }

    assertThat(ran)
        .as("every minute runs once, in order, the one whose claim was lost included")
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(
            ten.plusSeconds(60),
            ten.plusSeconds(120),
            ten.plusSeconds(180),
            ten.plusSeconds(240),
            ten.plusSeconds(300),
            ten.plusSeconds(360));
  }
}
