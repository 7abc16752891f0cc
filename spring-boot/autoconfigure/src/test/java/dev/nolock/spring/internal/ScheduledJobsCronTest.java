package dev.nolock.spring.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.DayOfWeek;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import org.junit.jupiter.api.Test;

/**
 * Spring's cron expressions mean in {@code @FencedScheduled} what they mean in Spring's
 * {@code @Scheduled}: "*" in one or both day fields, named days; a numbered day of the week, which
 * Spring and Quartz count differently, is refused rather than moved to another day.
 */
class ScheduledJobsCronTest {

  private static final ZoneId UTC = ZoneOffset.UTC;
  // A Sunday.
  private static final Instant SUNDAY_NOON = Instant.parse("2026-12-06T12:00:00Z");

  private static DayOfWeek nextDay(String cron) {
    return ScheduledJobs.parse(cron, UTC).nextAfter(SUNDAY_NOON).get().atZone(UTC).getDayOfWeek();
  }

  @Test
  void bothDayFieldsStarRunsEveryDay() {
    assertThat(ScheduledJobs.parse("0 0 2 * * *", UTC).nextAfter(SUNDAY_NOON).get())
        .isEqualTo(Instant.parse("2026-12-07T02:00:00Z"));
  }

  @Test
  void aNamedDayWithStarInDayOfMonthRunsOnThatDay() {
    assertThat(nextDay("0 0 9 * * MON-FRI")).isEqualTo(DayOfWeek.MONDAY);
    assertThat(nextDay("0 0 9 * * WED")).isEqualTo(DayOfWeek.WEDNESDAY);
    assertThat(nextDay("0 0 9 ? * WED")).isEqualTo(DayOfWeek.WEDNESDAY);
  }

  @Test
  void aDayOfMonthWithStarInDayOfWeekRunsOnThatDate() {
    assertThat(ScheduledJobs.parse("0 0 2 15 * *", UTC).nextAfter(SUNDAY_NOON).get())
        .isEqualTo(Instant.parse("2026-12-15T02:00:00Z"));
  }

  @Test
  void aNumberedDayOfTheWeekIsRefusedNotMovedToAnotherDay() {
    // Spring's 1 is Monday, Quartz's is Sunday.
    assertThatThrownBy(() -> ScheduledJobs.parse("0 0 2 ? * 1", UTC))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("name it instead");
  }

  @Test
  void crontabsFiveFieldsKeepTheirOwnNumbering() {
    // crontab's 1 is Monday, as Spring's.
    assertThat(nextDay("0 2 * * 1")).isEqualTo(DayOfWeek.MONDAY);
  }
}
