package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

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
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A scheduled time whose claim met a dropped connection is claimed (or recognised as this
 * instance's) by the next pass, not skipped until the next scheduled time: a time counts as handled
 * only once it was claimed here or lost to another instance. The faults are testkit's {@link
 * JdbcFaults} on the claim's {@code INSERT}: lost before PostgreSQL saw it, or applied with its
 * answer lost.
 */
@ExtendWith(PostgresExtension.class)
class ClaimFaultIT {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");
  private static final Predicate<String> CLAIM = JdbcFaults.sqlContaining("insert into");

  private static PostgresSchema schema;
  private static Runs runs;

  private JdbcFaults faults;

  @BeforeAll
  static void createTable(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
    s.dsl()
        .execute(
            "CREATE TABLE ran (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " instance text NOT NULL)"); // no unique key: it counts runs
  }

  private static void ran(String instance, ScheduledRun run) {
    schema
        .dsl()
        .execute(
            "INSERT INTO ran (job, scheduled_at, instance) VALUES (?, CAST(? AS timestamptz), ?)",
            run.job(),
            OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
            instance);
  }

  private static List<String> ranBy(String job) {
    return schema
        .dsl()
        .resultQuery("SELECT instance FROM ran WHERE job = ? ORDER BY ctid", job)
        .fetch(0, String.class);
  }

  @BeforeEach
  void pool() {
    faults = JdbcFaults.pool(schema.jdbcUrl());
  }

  @AfterEach
  void closePool() {
    faults.close();
  }

  @Test
  void aDailyRunWhoseClaimWasLostOnADroppedConnectionRunsAtTheNextPassNotTheNextDay() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom("daily", DAILY_AT_3).clock(clock).build(),
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
            ScheduleConfig.custom("daily-answer-lost", DAILY_AT_3).clock(clock).build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextStatement(FaultKind.ANSWER_LOST, CLAIM);

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
                ScheduleConfig.custom("daily-two", DAILY_AT_3).clock(clock).owner("a").build(),
                ran::add);
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                faults.dataSource(),
                ScheduleConfig.custom("daily-two", DAILY_AT_3).clock(clock).owner("b").build(),
                ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextStatement(FaultKind.ANSWER_LOST, CLAIM);
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
        ScheduleConfig.custom(job, DAILY_AT_3).clock(clock).owner("billing-service").build();
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
      InjectedFault lostAnswer = faults.onNextStatement(FaultKind.ANSWER_LOST, CLAIM);
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
