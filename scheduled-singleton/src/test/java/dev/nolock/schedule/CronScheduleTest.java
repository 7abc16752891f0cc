package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Instant;
import java.time.ZoneId;
import org.junit.jupiter.api.Test;

class CronScheduleTest {

  private static final Instant T = Instant.parse("2026-03-10T10:00:00Z");

  @Test
  void quartzEverySecondHasWholeSecondTimesEvenFromAFractionalInstant() {
    CronSchedule schedule = CronSchedule.quartz("* * * * * ?");

    assertThat(schedule.nextAfter(T.plusMillis(500))).contains(T.plusSeconds(1));
    assertThat(schedule.nextAfter(T)).contains(T.plusSeconds(1));
    assertThat(schedule.latestAtOrBefore(T)).contains(T);
    assertThat(schedule.latestAtOrBefore(T.plusMillis(999))).contains(T);
    assertThat(schedule.latestBefore(T)).contains(T.minusSeconds(1));
    assertThat(schedule.latestBefore(T.plusMillis(1))).contains(T);
  }

  @Test
  void unixFiveFieldsHaveMinuteResolution() {
    CronSchedule schedule = CronSchedule.unix("*/5 * * * *");

    assertThat(schedule.nextAfter(T)).contains(T.plusSeconds(300));
    assertThat(schedule.latestAtOrBefore(T.plusSeconds(299))).contains(T);
    assertThat(schedule.latestBefore(T)).contains(T.minusSeconds(300));
    assertThat(schedule.dialect()).isEqualTo(CronSchedule.Dialect.UNIX);
  }

  @Test
  void aZoneMovesTheInstantsOfALocalTime() {
    CronSchedule utc = CronSchedule.quartz("0 0 2 * * ?");
    CronSchedule berlin = utc.inZone(ZoneId.of("Europe/Berlin"));

    assertThat(utc.nextAfter(T)).contains(Instant.parse("2026-03-11T02:00:00Z"));
    assertThat(berlin.nextAfter(T)).contains(Instant.parse("2026-03-11T01:00:00Z"));
    assertThat(berlin).isNotEqualTo(utc).isEqualTo(utc.inZone(ZoneId.of("Europe/Berlin")));
  }

  @Test
  void aLocalTimeInTheSpringForwardGapIsSkippedThatDay() {
    CronSchedule berlin = CronSchedule.quartz("0 30 2 * * ?").inZone(ZoneId.of("Europe/Berlin"));

    // 2026-03-29 02:30 does not exist in Berlin: the next run after the 28th is on the 30th.
    assertThat(berlin.nextAfter(Instant.parse("2026-03-28T12:00:00Z")))
        .contains(Instant.parse("2026-03-30T00:30:00Z"));
  }

  @Test
  void aLocalTimeThatHappensTwiceRunsAtItsFirstOccurrenceOnly() {
    CronSchedule berlin = CronSchedule.quartz("0 30 2 * * ?").inZone(ZoneId.of("Europe/Berlin"));

    Instant first = berlin.nextAfter(Instant.parse("2026-10-24T12:00:00Z")).orElseThrow();
    assertThat(first).isEqualTo(Instant.parse("2026-10-25T00:30:00Z")); // 02:30 CEST
    assertThat(berlin.nextAfter(first)).contains(Instant.parse("2026-10-26T01:30:00Z"));
  }

  @Test
  void aScheduleWithoutFurtherTimesAnswersEmpty() {
    CronSchedule past = CronSchedule.quartz("0 0 12 * * ? 2020");

    assertThat(past.nextAfter(T)).isEmpty();
    assertThat(past.latestAtOrBefore(T)).contains(Instant.parse("2020-12-31T12:00:00Z"));
  }

  @Test
  void sixFieldsAsUnixAreRefusedWithAPointerToQuartz() {
    assertThatThrownBy(() -> CronSchedule.unix("* * * * * *"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a valid UNIX cron expression")
        .hasMessageContaining("CronSchedule.quartz(...)");
  }

  @Test
  void fiveFieldsAsQuartzAreRefusedWithAPointerToUnix() {
    assertThatThrownBy(() -> CronSchedule.quartz("*/5 * * * *"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a valid QUARTZ cron expression")
        .hasMessageContaining("CronSchedule.unix(...)");
  }

  @Test
  void quartzWithBothDayFieldsSetIsRefused() {
    assertThatThrownBy(() -> CronSchedule.quartz("* * * * * *"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("one day field '?'");
  }

  @Test
  void blankAndNullExpressionsAreRefused() {
    assertThatThrownBy(() -> CronSchedule.unix(" "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blank");
    assertThatThrownBy(() -> CronSchedule.quartz(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  @Test
  void outOfRangeFieldsAreRefused() {
    assertThatThrownBy(() -> CronSchedule.unix("61 * * * *"))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
