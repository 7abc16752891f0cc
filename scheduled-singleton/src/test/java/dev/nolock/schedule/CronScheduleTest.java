package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.assertj.core.api.SoftAssertions;
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

  private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");
  private static final ZoneId NEW_YORK = ZoneId.of("America/New_York");

  private static Instant at(String instant) {
    return Instant.parse(instant);
  }

  /** The scheduled times in {@code [from, to)}, walking forward with nextAfter. */
  private static List<Instant> forward(CronSchedule schedule, Instant from, Instant to) {
    List<Instant> times = new ArrayList<>();
    Instant cursor = from.minusSeconds(1);
    while (true) {
      Instant next = schedule.nextAfter(cursor).get();
      if (!next.isBefore(to)) {
        return times;
      }
      times.add(next);
      cursor = next;
    }
  }

  /** The scheduled times in {@code [from, to)}, walking back with latestBefore, oldest first. */
  private static List<Instant> backward(CronSchedule schedule, Instant from, Instant to) {
    List<Instant> times = new ArrayList<>();
    Instant cursor = to;
    while (true) {
      Instant before = schedule.latestBefore(cursor).get();
      if (before.isBefore(from)) {
        Collections.reverse(times);
        return times;
      }
      times.add(before);
      cursor = before;
    }
  }

  @Test
  void aLocalTimeInTheSpringForwardGapIsSkippedThatDay() {
    CronSchedule berlin = CronSchedule.quartz("0 30 2 * * ?").inZone(BERLIN);

    // 2026-03-29 02:30 does not exist in Berlin: the next run after the 28th is on the 30th.
    assertThat(berlin.nextAfter(at("2026-03-28T12:00:00Z"))).contains(at("2026-03-30T00:30:00Z"));
    assertThat(berlin.latestAtOrBefore(at("2026-03-29T12:00:00Z")))
        .contains(at("2026-03-28T01:30:00Z"));
    assertThat(berlin.latestBefore(at("2026-03-30T00:30:00Z")))
        .contains(at("2026-03-28T01:30:00Z"));
  }

  @Test
  void aLocalTimeInTheSpringForwardGapIsSkippedThatDayInNewYork() {
    CronSchedule newYork = CronSchedule.quartz("0 30 2 * * ?").inZone(NEW_YORK);

    // 2026-03-08 02:30 does not exist in New York (02:00 EST -> 03:00 EDT).
    assertThat(newYork.nextAfter(at("2026-03-07T12:00:00Z"))).contains(at("2026-03-09T06:30:00Z"));
    assertThat(newYork.latestAtOrBefore(at("2026-03-08T12:00:00Z")))
        .contains(at("2026-03-07T07:30:00Z"));
    assertThat(newYork.latestBefore(at("2026-03-09T06:30:00Z")))
        .contains(at("2026-03-07T07:30:00Z"));
  }

  @Test
  void aScheduleEveryFifteenMinutesLosesNoInstantWhenTheClocksSpringForward() {
    // The local hour 02:00-02:59 does not exist; its quarters are not scheduled, and no instant
    // is lost: 01:45 CET (00:45Z) is followed by 03:00 CEST (01:00Z).
    CronSchedule berlin = CronSchedule.quartz("0 */15 * * * ?").inZone(BERLIN);
    List<Instant> quarters =
        List.of(
            at("2026-03-29T00:00:00Z"),
            at("2026-03-29T00:15:00Z"),
            at("2026-03-29T00:30:00Z"),
            at("2026-03-29T00:45:00Z"),
            at("2026-03-29T01:00:00Z"),
            at("2026-03-29T01:15:00Z"));

    assertThat(forward(berlin, quarters.get(0), at("2026-03-29T01:30:00Z")))
        .containsExactlyElementsOf(quarters);
    assertThat(backward(berlin, quarters.get(0), at("2026-03-29T01:30:00Z")))
        .containsExactlyElementsOf(quarters);
    assertThat(berlin.latestAtOrBefore(at("2026-03-29T01:00:00Z")))
        .contains(at("2026-03-29T01:00:00Z"));
  }

  @Test
  void aLocalTimeThatHappensTwiceRunsAtItsFirstOccurrenceOnly() {
    CronSchedule berlin = CronSchedule.quartz("0 30 2 * * ?").inZone(BERLIN);
    Instant first = at("2026-10-25T00:30:00Z"); // 02:30 CEST
    Instant second = at("2026-10-25T01:30:00Z"); // 02:30 CET, after the clocks went back
    Instant nextDay = at("2026-10-26T01:30:00Z");

    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(berlin.nextAfter(at("2026-10-24T12:00:00Z"))).contains(first);
          softly.assertThat(berlin.nextAfter(first)).contains(nextDay);
          softly
              .assertThat(berlin.nextAfter(first.plusSeconds(1)))
              .as("nextAfter just after 02:30 CEST skips 02:30 CET")
              .contains(nextDay);
          softly.assertThat(berlin.nextAfter(second.minusSeconds(1))).contains(nextDay);
          softly
              .assertThat(berlin.latestAtOrBefore(second))
              .as("latestAtOrBefore at 02:30 CET answers 02:30 CEST")
              .contains(first);
          softly
              .assertThat(berlin.latestAtOrBefore(second.plusSeconds(1)))
              .as("latestAtOrBefore just after 02:30 CET answers 02:30 CEST")
              .contains(first);
          softly
              .assertThat(berlin.latestBefore(second.plusSeconds(1)))
              .as("latestBefore just after 02:30 CET answers 02:30 CEST")
              .contains(first);
          softly.assertThat(berlin.latestBefore(nextDay)).contains(first);
        });
  }

  @Test
  void aLocalTimeThatHappensTwiceRunsAtItsFirstOccurrenceOnlyInNewYork() {
    CronSchedule newYork = CronSchedule.quartz("0 30 1 * * ?").inZone(NEW_YORK);
    Instant first = at("2026-11-01T05:30:00Z"); // 01:30 EDT
    Instant second = at("2026-11-01T06:30:00Z"); // 01:30 EST, after the clocks went back
    Instant nextDay = at("2026-11-02T06:30:00Z");

    SoftAssertions.assertSoftly(
        softly -> {
          softly.assertThat(newYork.nextAfter(at("2026-10-31T12:00:00Z"))).contains(first);
          softly.assertThat(newYork.nextAfter(first)).contains(nextDay);
          softly
              .assertThat(newYork.nextAfter(first.plusSeconds(1)))
              .as("nextAfter just after 01:30 EDT skips 01:30 EST")
              .contains(nextDay);
          softly
              .assertThat(newYork.latestAtOrBefore(second.plusSeconds(1)))
              .as("latestAtOrBefore just after 01:30 EST answers 01:30 EDT")
              .contains(first);
          softly
              .assertThat(newYork.latestBefore(second.plusSeconds(1)))
              .as("latestBefore just after 01:30 EST answers 01:30 EDT")
              .contains(first);
          softly.assertThat(newYork.latestBefore(nextDay)).contains(first);
        });
  }

  @Test
  void aScheduleEveryFifteenMinutesRunsTheRepeatedHourOnce() {
    // Berlin's 02:00-02:59 happens twice on 2026-10-25: 00:00Z-00:59Z (CEST), then 01:00Z-01:59Z
    // (CET). Each quarter of it is a local time that happens twice: it runs at its first
    // occurrence only, and the next time after 02:45 CEST is 03:00 CET (02:00Z).
    CronSchedule berlin = CronSchedule.quartz("0 */15 * * * ?").inZone(BERLIN);
    List<Instant> once =
        List.of(
            at("2026-10-24T23:45:00Z"),
            at("2026-10-25T00:00:00Z"),
            at("2026-10-25T00:15:00Z"),
            at("2026-10-25T00:30:00Z"),
            at("2026-10-25T00:45:00Z"),
            at("2026-10-25T02:00:00Z"));

    SoftAssertions.assertSoftly(
        softly -> {
          softly
              .assertThat(forward(berlin, once.get(0), at("2026-10-25T02:01:00Z")))
              .as("nextAfter across the repeated hour")
              .containsExactlyElementsOf(once);
          softly
              .assertThat(backward(berlin, once.get(0), at("2026-10-25T02:01:00Z")))
              .as("latestBefore across the repeated hour")
              .containsExactlyElementsOf(once);
          for (Instant inRepeatedHour = at("2026-10-25T01:00:00Z");
              inRepeatedHour.isBefore(at("2026-10-25T02:00:00Z"));
              inRepeatedHour = inRepeatedHour.plusSeconds(450)) {
            softly
                .assertThat(berlin.latestAtOrBefore(inRepeatedHour))
                .as("latestAtOrBefore(%s), in the repeated hour", inRepeatedHour)
                .contains(at("2026-10-25T00:45:00Z"));
          }
        });
  }

  @Test
  void aScheduleEveryFifteenMinutesRunsTheRepeatedHourOnceInNewYork() {
    // New York's 01:00-01:59 happens twice on 2026-11-01: 05:00Z-05:59Z (EDT), 06:00Z-06:59Z (EST).
    CronSchedule newYork = CronSchedule.quartz("0 */15 * * * ?").inZone(NEW_YORK);
    List<Instant> once =
        List.of(
            at("2026-11-01T05:00:00Z"),
            at("2026-11-01T05:15:00Z"),
            at("2026-11-01T05:30:00Z"),
            at("2026-11-01T05:45:00Z"),
            at("2026-11-01T07:00:00Z"));

    SoftAssertions.assertSoftly(
        softly -> {
          softly
              .assertThat(forward(newYork, once.get(0), at("2026-11-01T07:01:00Z")))
              .as("nextAfter across the repeated hour")
              .containsExactlyElementsOf(once);
          softly
              .assertThat(backward(newYork, once.get(0), at("2026-11-01T07:01:00Z")))
              .as("latestBefore across the repeated hour")
              .containsExactlyElementsOf(once);
          softly
              .assertThat(newYork.latestAtOrBefore(at("2026-11-01T06:59:59Z")))
              .contains(at("2026-11-01T05:45:00Z"));
        });
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
