package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import javax.sql.DataSource;
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
    assertThat(config.attemptCheck()).isTrue();
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
        .isInstanceOf(NullPointerException.class)
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

  @Test
  void anOwnerWithAControlCharacterIsRefused() {
    assertThatThrownBy(() -> ScheduleConfig.custom("j", EVERY_MINUTE).owner("a\nb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }
}
