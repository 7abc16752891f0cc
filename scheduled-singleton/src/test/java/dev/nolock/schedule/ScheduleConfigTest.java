package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import javax.sql.DataSource;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

class ScheduleConfigTest {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  @Test
  void defaultsAreDocumented() {
    ScheduleConfig config = ScheduleConfig.custom("nightly-report", EVERY_MINUTE).build();

    assertThat(config.table()).isEqualTo("nolock_scheduled_runs");
    assertThat(config.lease()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.maxAttempts()).isEqualTo(3);
    assertThat(config.missedSchedules()).isEqualTo(MissedSchedules.runOnce());
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.shutdownTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.registry()).isEmpty();
    assertThat(config.metricsInstanceName()).isEmpty();
    assertThat(config.attemptCheck()).isTrue();
    assertThat(config.renewalAttemptCheck()).isTrue();
    assertThat(config.claimWindow()).isEqualTo(Duration.ofDays(7));
    assertThat(config.clockTolerance()).isEqualTo(Duration.ofSeconds(5));
  }

  @Test
  void aClockToleranceOutsideZeroToAnHourIsRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);
    assertThatThrownBy(() -> builder.clockTolerance(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 0 and 1 hour");
    assertThatThrownBy(() -> builder.clockTolerance(Duration.ofMinutes(61)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Fix clocks that are further ahead");
    assertThat(builder.clockTolerance(Duration.ZERO).build().clockTolerance()).isZero();
  }

  private static final java.time.Clock AT_TEN =
      java.time.Clock.fixed(
          java.time.Instant.parse("2026-03-10T10:00:00Z"), java.time.ZoneOffset.UTC);

  @Test
  void theDefaultClaimWindowIsTwiceTheCatchUpHorizonAndAtLeastSevenDays() {
    CronSchedule daily = CronSchedule.unix("0 3 * * *");

    // runEach(10) of a daily job reaches back 10 days just before the next time is due.
    assertThat(
            ScheduleConfig.custom("j", daily)
                .clock(AT_TEN)
                .missedSchedules(MissedSchedules.runEach(10))
                .build()
                .claimWindow())
        .isEqualTo(Duration.ofDays(20));
    assertThat(ScheduleConfig.custom("j", daily).clock(AT_TEN).build().claimWindow())
        .isEqualTo(Duration.ofDays(7));
    // A monthly job waits a month for its next time: its window covers two.
    assertThat(
            ScheduleConfig.custom("j", CronSchedule.unix("0 0 1 * *"))
                .clock(AT_TEN)
                .build()
                .claimWindow())
        .isEqualTo(Duration.ofDays(2 * 31));
  }

  @Test
  void theDefaultWindowAndItsValidationDoNotDependOnTheDateTheApplicationStarts() {
    CronSchedule monthly = CronSchedule.unix("0 0 1 * *");
    List<Duration> defaults = new ArrayList<>();
    for (String date :
        List.of(
            "2026-02-10T10:00:00Z",
            "2026-03-10T10:00:00Z",
            "2026-04-10T10:00:00Z",
            "2027-06-30T23:59:59Z")) {
      java.time.Clock clock =
          java.time.Clock.fixed(java.time.Instant.parse(date), java.time.ZoneOffset.UTC);
      defaults.add(ScheduleConfig.custom("j", monthly).clock(clock).build().claimWindow());
      assertThat(
              catchThrowable(
                  () ->
                      ScheduleConfig.custom("j", monthly)
                          .clock(clock)
                          .claimWindow(Duration.ofDays(30))
                          .build()))
          .as("a monthly job's 30-day window is refused when built on %s", date)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("PT744H"); // 31 days, the longest month
    }
    assertThat(defaults)
        .as("the default window of a monthly job built in February, March, April and June")
        .containsOnly(Duration.ofDays(62));
  }

  @Test
  void aBusinessHoursScheduleBuildsTheSameOnMondayMorningAndFridayAfternoon() {
    // Every second, 09:00 to 17:59, Monday to Friday: a 1 s gap most of the time, 15 h overnight,
    // 63 h over the weekend.
    CronSchedule businessHours = CronSchedule.quartz("* * 9-17 ? * MON-FRI");
    List<String> results = new ArrayList<>();
    for (String start : List.of("2026-03-09T09:00:00Z", "2026-03-13T16:00:00Z")) {
      java.time.Clock clock =
          java.time.Clock.fixed(java.time.Instant.parse(start), java.time.ZoneOffset.UTC);
      Throwable thrown =
          catchThrowable(
              () ->
                  ScheduleConfig.custom("j", businessHours)
                      .clock(clock)
                      .claimWindow(Duration.ofHours(1))
                      .build());
      results.add(
          thrown == null
              ? "built"
              : thrown.getClass().getSimpleName() + ": " + thrown.getMessage());
    }
    assertThat(results)
        .as(
            "claimWindow(1h) of the same schedule is accepted or refused whatever the day the"
                + " application starts (Monday 09:00, Friday 16:00)")
        .containsOnly(results.get(0));
  }

  @Test
  void aClaimWindowShorterThanTheCatchUpHorizonIsRefusedWithTheHorizon() {
    ScheduleConfig.Builder builder =
        ScheduleConfig.custom("j", CronSchedule.unix("0 3 * * *"))
            .clock(AT_TEN)
            .missedSchedules(MissedSchedules.runEach(10))
            .claimWindow(Duration.ofDays(9));

    assertThatThrownBy(builder::build)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("shorter than the catch-up horizon")
        .hasMessageContaining("runEach(10), PT240H")
        .hasMessageContaining("at least PT240H");
    assertThat(builder.claimWindow(Duration.ofDays(10)).build().claimWindow())
        .isEqualTo(Duration.ofDays(10));
  }

  @Test
  void aClaimWindowOutsideOneMinuteToACenturyIsRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);

    assertThatThrownBy(() -> builder.claimWindow(Duration.ofSeconds(59)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 1 min and 36500 days");
    assertThatThrownBy(() -> builder.claimWindow(Duration.ofDays(36_501)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(builder.claimWindow(Duration.ofMinutes(1)).build().claimWindow())
        .isEqualTo(Duration.ofMinutes(1));
  }

  @Test
  void theDefaultOwnerNamesTheHostAndProcess() {
    assertThat(ScheduleConfig.custom("j", EVERY_MINUTE).build().owner())
        .endsWith("/" + ProcessHandle.current().pid());
  }

  @Test
  void instancesThatShareAConfigurationHaveTheirOwnIdentities() {
    ScheduleConfig config = ScheduleConfig.custom("j", EVERY_MINUTE).owner("billing").build();
    DataSource unused = new PGSimpleDataSource();

    String a = ScheduledSingleton.plain(unused, config, run -> {}).identity();
    String b = ScheduledSingleton.plain(unused, config, run -> {}).identity();

    assertThat(a).isNotEqualTo(b).matches("billing#[0-9a-f]{16}");
    assertThat(b).matches("billing#[0-9a-f]{16}");
  }

  @Test
  void anOwnerWithoutRoomForTheNonceIsRefusedWithTheLimit() {
    String longest = "o".repeat(ScheduleConfig.MAX_OWNER_LENGTH);
    ScheduleConfig config = ScheduleConfig.custom("j", EVERY_MINUTE).owner(longest).build();
    assertThat(ScheduledSingleton.plain(new PGSimpleDataSource(), config, run -> {}).identity())
        .hasSize(255);

    assertThatThrownBy(() -> ScheduleConfig.custom("j", EVERY_MINUTE).owner(longest + "o"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("239 characters long, more than 238")
        .hasMessageContaining("'#' and a 16-digit nonce");
  }

  @Test
  void aBlankOrOverlongJobNameIsRefused() {
    assertThatThrownBy(() -> ScheduleConfig.custom(" ", EVERY_MINUTE))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("job name");
    assertThatThrownBy(() -> ScheduleConfig.custom("x".repeat(101), EVERY_MINUTE))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("more than 100");
  }

  @Test
  void aMissingScheduleIsRefused() {
    assertThatThrownBy(() -> ScheduleConfig.custom("j", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("CronSchedule.unix");
  }

  @Test
  void aTableNameThatIsNotAPlainIdentifierIsRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);

    assertThatThrownBy(() -> builder.table("runs; drop table x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("runs table");
    assertThatThrownBy(() -> builder.table("Runs"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lower case");
    assertThat(builder.table("app.scheduled_runs").build().table()).isEqualTo("app.scheduled_runs");
  }

  @Test
  void aLeaseOutsideOneSecondToOneHourIsRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);

    assertThatThrownBy(() -> builder.lease(Duration.ofMillis(999)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 1 s and 1 h")
        .hasMessageContaining("renewed every third");
    assertThatThrownBy(() -> builder.lease(Duration.ofHours(2)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void maxAttemptsOutsideOneToAHundredIsRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);

    assertThatThrownBy(() -> builder.maxAttempts(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("1 to 100");
    assertThatThrownBy(() -> builder.maxAttempts(101)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void timeoutsOutOfRangeAreRefused() {
    ScheduleConfig.Builder builder = ScheduleConfig.custom("j", EVERY_MINUTE);

    assertThatThrownBy(() -> builder.queryTimeout(Duration.ofMillis(10)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queryTimeout");
    assertThatThrownBy(() -> builder.shutdownTimeout(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("shutdownTimeout");
  }

  /**
   * A null passed to any configuration call is a configuration error: an IllegalArgumentException
   * that names what to pass, never a NullPointerException.
   */
  @Test
  void nullPassedToEveryConfigurationCallIsRefusedWithIllegalArgument() {
    ScheduleConfig config = ScheduleConfig.custom("j", EVERY_MINUTE).build();
    DataSource dataSource = new PGSimpleDataSource();
    Map<String, ThrowingCallable> calls = new LinkedHashMap<>();
    calls.put("custom(null, schedule)", () -> ScheduleConfig.custom(null, EVERY_MINUTE));
    calls.put("custom(job, null)", () -> ScheduleConfig.custom("j", null));
    calls.put("table(null)", () -> builder().table(null));
    calls.put("lease(null)", () -> builder().lease(null));
    calls.put("claimWindow(null)", () -> builder().claimWindow(null));
    calls.put("clockTolerance(null)", () -> builder().clockTolerance(null));
    calls.put("missedSchedules(null)", () -> builder().missedSchedules(null));
    calls.put("clock(null)", () -> builder().clock(null));
    calls.put("owner(null)", () -> builder().owner(null));
    calls.put("queryTimeout(null)", () -> builder().queryTimeout(null));
    calls.put("shutdownTimeout(null)", () -> builder().shutdownTimeout(null));
    calls.put("metrics(null, name)", () -> builder().metrics(null, "nightly"));
    calls.put("metrics(registry, null)", () -> builder().metrics(new SimpleMeterRegistry(), null));
    calls.put("onOutcome(null)", () -> builder().onOutcome(null));
    calls.put("errorDescriber(null)", () -> builder().errorDescriber(null));
    calls.put("CronSchedule.unix(null)", () -> CronSchedule.unix(null));
    calls.put("CronSchedule.quartz(null)", () -> CronSchedule.quartz(null));
    calls.put("inZone(null)", () -> EVERY_MINUTE.inZone(null));
    calls.put("nextAfter(null)", () -> EVERY_MINUTE.nextAfter(null));
    calls.put("latestAtOrBefore(null)", () -> EVERY_MINUTE.latestAtOrBefore(null));
    calls.put("latestBefore(null)", () -> EVERY_MINUTE.latestBefore(null));
    calls.put("plain(null, config, job)", () -> ScheduledSingleton.plain(null, config, r -> {}));
    calls.put("plain(ds, null, job)", () -> ScheduledSingleton.plain(dataSource, null, r -> {}));
    calls.put("plain(ds, config, null)", () -> ScheduledSingleton.plain(dataSource, config, null));
    calls.put(
        "fenced(null, config, job)", () -> ScheduledSingleton.fenced(null, config, (r, tx) -> {}));
    calls.put(
        "fenced(ds, null, job)", () -> ScheduledSingleton.fenced(dataSource, null, (r, tx) -> {}));
    calls.put(
        "fenced(ds, config, null)", () -> ScheduledSingleton.fenced(dataSource, config, null));

    Map<String, String> thrown = new LinkedHashMap<>();
    calls.forEach(
        (call, callable) -> {
          Throwable t = catchThrowable(callable);
          thrown.put(call, t == null ? "nothing" : t.getClass().getSimpleName());
        });
    assertThat(thrown)
        .as("what each configuration call throws when passed null")
        .allSatisfy(
            (call, type) -> assertThat(type).as(call).isEqualTo("IllegalArgumentException"));
    calls.forEach(
        (call, callable) ->
            assertThat(catchThrowable(callable).getMessage())
                .as("the message of %s says what to pass", call)
                .containsAnyOf("pass", "Pass", "use", "Use"));
  }

  private static ScheduleConfig.Builder builder() {
    return ScheduleConfig.custom("j", EVERY_MINUTE);
  }

  @Test
  void metricsTakeARegistryAndAnInstanceName() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ScheduleConfig config =
        ScheduleConfig.custom("nightly-report", EVERY_MINUTE)
            .metrics(registry, "reports-a")
            .build();

    assertThat(config.registry()).containsExactly(registry);
    assertThat(config.metricsInstanceName()).containsExactly("reports-a");
    assertThatThrownBy(() -> ScheduleConfig.custom("j", EVERY_MINUTE).metrics(registry, " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("metrics instance name");
    assertThatThrownBy(
            () -> ScheduleConfig.custom("j", EVERY_MINUTE).metrics(registry, "x".repeat(101)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("more than 100");
  }

  @Test
  void anOwnerWithAControlCharacterIsRefused() {
    assertThatThrownBy(() -> ScheduleConfig.custom("j", EVERY_MINUTE).owner("a\nb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }
}
