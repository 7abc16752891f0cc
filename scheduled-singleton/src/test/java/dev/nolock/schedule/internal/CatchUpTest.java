package dev.nolock.schedule.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.MissedSchedules;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class CatchUpTest {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Instant T0 = Instant.parse("2026-03-10T10:00:00Z");

  private static Instant minute(int n) {
    return T0.plusSeconds(60L * n);
  }

  @Test
  void withNothingMissedEveryPolicyRunsTheDueTimeAlone() {
    for (MissedSchedules policy :
        new MissedSchedules[] {
          MissedSchedules.skip(), MissedSchedules.runOnce(), MissedSchedules.runEach()
        }) {
      CatchUp.Plan plan = CatchUp.plan(EVERY_MINUTE, policy, T0, minute(1), 1000);

      assertThat(plan.slots()).containsExactly(new CatchUp.Slot(minute(1), minute(1), 0));
      assertThat(plan.missed()).isZero();
      assertThat(plan.firstMissed()).isEmpty();
    }
  }

  @Test
  void skipRunsTheLatestAndCountsTheOthers() {
    CatchUp.Plan plan = CatchUp.plan(EVERY_MINUTE, MissedSchedules.skip(), T0, minute(5), 1000);

    assertThat(plan.slots()).containsExactly(new CatchUp.Slot(minute(5), minute(5), 4));
    assertThat(plan.firstMissed()).contains(minute(1));
  }

  @Test
  void runOnceCoversFromTheFirstMissedTime() {
    CatchUp.Plan plan = CatchUp.plan(EVERY_MINUTE, MissedSchedules.runOnce(), T0, minute(5), 1000);

    assertThat(plan.slots()).containsExactly(new CatchUp.Slot(minute(5), minute(1), 4));
  }

  @Test
  void runEachWithinItsBoundRunsEveryTimeOldestFirst() {
    CatchUp.Plan plan =
        CatchUp.plan(EVERY_MINUTE, MissedSchedules.runEach(10), T0, minute(5), 1000);

    assertThat(plan.slots())
        .extracting(CatchUp.Slot::scheduledAt)
        .containsExactly(minute(1), minute(2), minute(3), minute(4), minute(5));
    assertThat(plan.missed()).isZero();
  }

  @Test
  void runEachBeyondItsBoundRunsTheLatestAndRecordsTheOlderOnTheFirst() {
    CatchUp.Plan plan = CatchUp.plan(EVERY_MINUTE, MissedSchedules.runEach(3), T0, minute(8), 1000);

    assertThat(plan.slots())
        .containsExactly(
            new CatchUp.Slot(minute(6), minute(6), 5),
            new CatchUp.Slot(minute(7), minute(7), 0),
            new CatchUp.Slot(minute(8), minute(8), 0));
    assertThat(plan.missed()).isEqualTo(5);
    assertThat(plan.firstMissed()).contains(minute(1));
  }

  @Test
  void countingStopsAtTheCap() {
    CatchUp.Plan plan = CatchUp.plan(EVERY_MINUTE, MissedSchedules.skip(), T0, minute(10_000), 50);

    assertThat(plan.missed()).isEqualTo(50);
    assertThat(plan.slots()).hasSize(1);
  }

  @Test
  void aFloorBetweenScheduledTimesIsExclusive() {
    CatchUp.Plan plan =
        CatchUp.plan(EVERY_MINUTE, MissedSchedules.runEach(), T0.plusSeconds(30), minute(3), 1000);

    assertThat(plan.slots())
        .extracting(CatchUp.Slot::scheduledAt)
        .containsExactly(minute(1), minute(2), minute(3));
  }

  @Test
  void aDueTimeNotAfterTheFloorIsAProgrammingError() {
    assertThatThrownBy(() -> CatchUp.plan(EVERY_MINUTE, MissedSchedules.skip(), T0, T0, 10))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aCatchUpAcrossTheNightTheClocksGoBackCountsTheRepeatedHourOnce() {
    // Every quarter in Berlin; the fleet ran 01:45 CEST (2026-10-24T23:45Z) and was down until
    // after 03:00 CET (02:00Z). The quarters of the repeated 02:00-02:59 were due once each, at
    // 02:xx CEST (00:00Z-00:45Z); their second occurrences (01:00Z-01:45Z) are no times at all.
    CronSchedule berlin =
        CronSchedule.quartz("0 */15 * * * ?").inZone(java.time.ZoneId.of("Europe/Berlin"));
    Instant floor = Instant.parse("2026-10-24T23:45:00Z");
    Instant due = Instant.parse("2026-10-25T02:00:00Z");

    CatchUp.Plan each = CatchUp.plan(berlin, MissedSchedules.runEach(10), floor, due, 1000);
    CatchUp.Plan skip = CatchUp.plan(berlin, MissedSchedules.skip(), floor, due, 1000);

    assertThat(each.slots())
        .extracting(CatchUp.Slot::scheduledAt)
        .containsExactly(
            Instant.parse("2026-10-25T00:00:00Z"),
            Instant.parse("2026-10-25T00:15:00Z"),
            Instant.parse("2026-10-25T00:30:00Z"),
            Instant.parse("2026-10-25T00:45:00Z"),
            due);
    assertThat(skip.slots()).containsExactly(new CatchUp.Slot(due, due, 4));
    assertThat(skip.firstMissed()).contains(Instant.parse("2026-10-25T00:00:00Z"));
  }
}
