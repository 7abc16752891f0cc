package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Instant;
import java.time.ZoneId;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The night the clocks go back, on a simulated wall clock and the real runs table: a local time
 * that happens twice is claimed and run once, at its first occurrence, by a fleet of two instances
 * whose passes wake at both occurrences.
 */
@ExtendWith(PostgresExtension.class)
class DaylightSavingIT {

  private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");

  private static DataSource pool;
  private static Runs runs;

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    pool = schema.dataSource();
    runs = new Runs(schema.dsl());
    ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("setup", CronSchedule.unix("* * * * *"))
                .clock(new MutableClock(Instant.parse("2026-10-24T12:00:00Z")))
                .claimWindow(MutableClock.ANY_DATE)
                .build(),
            r -> {})
        .createTableIfMissing();
  }

  /**
   * Two instances of one job wake just after each of {@code wakes} (100 ms late) and run what is
   * due; answers the scheduled times the job ran, in order.
   */
  private static List<Instant> fleetWakingAt(
      String job, CronSchedule schedule, List<Instant> wakes) {
    MutableClock clock = new MutableClock(wakes.get(0).minusSeconds(60));
    List<Instant> ran = new CopyOnWriteArrayList<>();
    ScheduleConfig config =
        ScheduleConfig.custom(job, schedule)
            .missedSchedules(MissedSchedules.runEach())
            .clock(clock)
            .claimWindow(MutableClock.ANY_DATE)
            .build();
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(pool, config, r -> ran.add(r.scheduledAt()));
        ScheduledSingleton b =
            ScheduledSingleton.plain(pool, config, r -> ran.add(r.scheduledAt()))) {
      for (Instant wake : wakes) {
        clock.set(wake.plusMillis(100));
        a.runDueNow();
        b.runDueNow();
      }
    }
    return ran;
  }

  @Test
  void aDailyLocalTimeThatHappensTwiceRunsOnceAtItsFirstOccurrence() {
    Instant cest = Instant.parse("2026-10-25T00:30:00Z"); // 02:30 CEST
    Instant cet = Instant.parse("2026-10-25T01:30:00Z"); // 02:30 CET, an hour later
    Instant nextDay = Instant.parse("2026-10-26T01:30:00Z");

    List<Instant> ran =
        fleetWakingAt(
            "dst-daily",
            CronSchedule.quartz("0 30 2 * * ?").inZone(BERLIN),
            List.of(cest, cet, nextDay));

    assertThat(ran).containsExactly(cest, nextDay);
    assertThat(runs.of("dst-daily"))
        .extracting(Runs.Row::scheduledAt)
        .as("run rows of the job")
        .containsExactly(cest, nextDay);
  }

  @Test
  void aQuarterHourlyJobRunsTheRepeatedHourOnce() {
    List<Instant> wakes =
        List.of(
            Instant.parse("2026-10-25T00:00:00Z"), // 02:00 CEST
            Instant.parse("2026-10-25T00:15:00Z"),
            Instant.parse("2026-10-25T00:30:00Z"),
            Instant.parse("2026-10-25T00:45:00Z"),
            Instant.parse("2026-10-25T01:00:00Z"), // 02:00 CET: the same hour again
            Instant.parse("2026-10-25T01:15:00Z"),
            Instant.parse("2026-10-25T01:30:00Z"),
            Instant.parse("2026-10-25T01:45:00Z"),
            Instant.parse("2026-10-25T02:00:00Z")); // 03:00 CET

    List<Instant> ran =
        fleetWakingAt("dst-quarters", CronSchedule.quartz("0 */15 * * * ?").inZone(BERLIN), wakes);

    List<Instant> once =
        List.of(wakes.get(0), wakes.get(1), wakes.get(2), wakes.get(3), wakes.get(8));
    assertThat(ran).containsExactlyElementsOf(once);
    assertThat(runs.of("dst-quarters"))
        .extracting(Runs.Row::scheduledAt)
        .as("run rows of the job")
        .containsExactlyElementsOf(once);
  }

  @Test
  void negativeControlTheSameWakesInUtcRunBothHours() {
    // The control for the two tests above: the same fleet, woken at the same instants, runs a
    // second time at 01:30Z when the schedule names it (here in UTC). So the single row above is
    // the schedule's answer, not a pass that did not look.
    Instant first = Instant.parse("2026-10-25T00:30:00Z");
    Instant second = Instant.parse("2026-10-25T01:30:00Z");

    List<Instant> ran =
        fleetWakingAt("dst-control", CronSchedule.quartz("0 30 0,1 * * ?"), List.of(first, second));

    assertThat(ran).containsExactly(first, second);
    assertThat(runs.of("dst-control"))
        .extracting(Runs.Row::scheduledAt)
        .containsExactly(first, second);
  }

  @Test
  void aLocalTimeInTheSpringForwardGapDoesNotRunThatDay() {
    // 02:30 does not exist in Berlin on 2026-03-29 (02:00 CET -> 03:00 CEST at 01:00Z).
    Instant dayBefore = Instant.parse("2026-03-28T01:30:00Z"); // 02:30 CET
    Instant dayAfter = Instant.parse("2026-03-30T00:30:00Z"); // 02:30 CEST

    List<Instant> ran =
        fleetWakingAt(
            "dst-spring",
            CronSchedule.quartz("0 30 2 * * ?").inZone(BERLIN),
            List.of(
                dayBefore,
                Instant.parse("2026-03-29T00:30:00Z"),
                Instant.parse("2026-03-29T01:30:00Z"),
                dayAfter));

    assertThat(ran).containsExactly(dayBefore, dayAfter);
  }
}
