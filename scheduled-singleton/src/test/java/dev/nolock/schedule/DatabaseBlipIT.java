package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A scheduled time whose claim fails on a database blip is claimed again by the next pass, not
 * skipped until the next scheduled time: a slot counts as handled only once it was claimed here or
 * lost to another instance. The blip is real: a TCP proxy between the scheduler and PostgreSQL cuts
 * every connection as the claim's {@code INSERT} is about to be sent, then accepts connections
 * again.
 */
@ExtendWith(PostgresExtension.class)
class DatabaseBlipIT {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");
  private static final Predicate<String> CLAIM = sql -> sql.startsWith("insert into");

  private static PostgresSchema schema;
  private static Runs runs;

  private DatabaseBlip blip;

  @BeforeAll
  static void createTable(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
  }

  @BeforeEach
  void proxy() {
    blip = DatabaseBlip.before(schema);
  }

  @AfterEach
  void closeProxy() {
    blip.close();
  }

  @Test
  void aDailyRunWhoseClaimFailedOnABlipRunsAtTheNextPassNotTheNextDay() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            blip.dataSource(),
            ScheduleConfig.custom("daily", DAILY_AT_3).clock(clock).build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      blip.onStatement(CLAIM, 0);

      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + THREE_AM);
      assertThat(blip.fired()).as("the blip cut the claim").isEqualTo(1);
      assertThat(runs.of("daily")).as("PostgreSQL never saw the claim").isEmpty();

      List<RunOutcome> retried = instance.runDueNow();

      assertThat(ran)
          .as("the 03:00 run whose claim failed on a one-off blip runs at the next pass")
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
  void theLoopRetriesAPassWhoseClaimFailedAndRunsTheTimeWithinTheBackoff() {
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            blip.dataSource(),
            ScheduleConfig.custom("daily-loop", DAILY_AT_3)
                .clock(clock)
                .onOutcome(outcomes::add)
                .build(),
            ran::add)) {
      clock.set(THREE_AM.plusMillis(100));
      blip.onStatement(CLAIM, 0);
      loop.start();
      // A failed pass is retried after at most 500 ms; without the retry the next wake is 03:00
      // tomorrow.
      await("the 03:00 run after the blip")
          .atMost(Duration.ofSeconds(10))
          .until(() -> !ran.isEmpty());
    }

    assertThat(blip.fired()).isEqualTo(1);
    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(THREE_AM);
    assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
  }

  @Test
  void aCatchUpThatFailsHalfwayResumesAtTheTimeWhoseClaimFailed() {
    Instant ten = Instant.parse("2026-03-10T10:00:00Z");
    MutableClock clock = new MutableClock(ten.plusMillis(100));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            blip.dataSource(),
            ScheduleConfig.custom("catch-up", EVERY_MINUTE)
                .clock(clock)
                .missedSchedules(MissedSchedules.runEach(10))
                .build(),
            ran::add)) {
      clock.set(ten.plusSeconds(60).plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);

      // Down from 10:02 to 10:06; the catch-up claims 10:02 to 10:06 in order, and the blip cuts
      // the third claim (10:04).
      clock.set(ten.plusSeconds(6 * 60).plusMillis(100));
      blip.onStatement(CLAIM, 2);
      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + ten.plusSeconds(4 * 60));
      assertThat(blip.fired()).isEqualTo(1);

      instance.runDueNow();
    }

    assertThat(ran)
        .as("every minute runs once, in order, the one whose claim failed included")
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
