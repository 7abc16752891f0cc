package dev.nolock.spring.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.schedule.ScheduledRun;
import dev.nolock.spring.FencedScheduled;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockScheduleAutoConfiguration;
import dev.nolock.spring.internal.ScheduledRunsSection;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcTemplateAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.Environment;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;

/**
 * Two instances (two contexts) with the same {@code @FencedScheduled} job due every second: each
 * scheduled time is written once, where Spring's own {@code @Scheduled} on the same two instances
 * writes each second twice. And the method's {@code JdbcTemplate} writes are in the run's
 * transaction: a run that throws after writing leaves nothing, where a write the binding does not
 * reach stays.
 */
@ExtendWith(PostgresExtension.class)
class FencedScheduledIT {

  private static final String EVERY_SECOND = "* * * * * *";

  private final PostgresSchema schema;

  FencedScheduledIT(PostgresSchema schema) {
    this.schema = schema;
  }

  /** Writes the scheduled time it runs for; "ticker.fail" makes it throw after the write. */
  static class Ticker {
    /** Counted down by each failing run; set by the test that makes runs fail. */
    static volatile CountDownLatch failedRuns = new CountDownLatch(0);

    private final JdbcTemplate jdbc;
    private final String instance;
    private final boolean fail;

    @Autowired
    Ticker(JdbcTemplate jdbc, Environment environment) {
      this(
          jdbc,
          environment.getProperty("ticker.instance"),
          environment.getProperty("ticker.fail", Boolean.class, false));
    }

    Ticker(JdbcTemplate jdbc, String instance, boolean fail) {
      this.jdbc = jdbc;
      this.instance = instance;
      this.fail = fail;
    }

    @FencedScheduled(name = "ticker", cron = "${ticker.cron}")
    void tick(ScheduledRun run) {
      record(jdbc, run.scheduledAt(), instance);
      if (fail) {
        failedRuns.countDown();
        throw new IllegalStateException("the job fails after its write");
      }
    }
  }

  @Configuration(proxyBeanMethods = false)
  @EnableScheduling
  static class SpringScheduling {}

  /** The control: Spring's own scheduling, on every instance. */
  static class SpringTicker {
    private final JdbcTemplate jdbc;
    private final String instance;

    SpringTicker(JdbcTemplate jdbc, Environment environment) {
      this.jdbc = jdbc;
      this.instance = environment.getProperty("ticker.instance");
    }

    @Scheduled(cron = EVERY_SECOND)
    void tick() {
      record(jdbc, Instant.now().truncatedTo(ChronoUnit.SECONDS), instance);
    }
  }

  static void record(JdbcTemplate jdbc, Instant scheduledAt, String instance) {
    jdbc.update(
        "insert into ticks (scheduled_at, instance) values (?, ?)",
        Timestamp.from(scheduledAt),
        instance);
  }

  @BeforeEach
  void table() {
    schema.dsl().execute("drop table if exists ticks");
    // No unique key on scheduled_at: a time run twice must show as two rows.
    schema.dsl().execute("create table ticks (scheduled_at timestamptz not null, instance text)");
    schema.dsl().execute("drop table if exists nolock_scheduled_runs");
  }

  private ApplicationContextRunner instance(String id) {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                JdbcTemplateAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockScheduleAutoConfiguration.class))
        .withPropertyValues(
            "spring.datasource.url=" + schema.jdbcUrl(),
            "nolock.create-tables=true",
            "ticker.cron=" + EVERY_SECOND,
            "ticker.instance=" + id);
  }

  @SuppressWarnings("unchecked") // the section's report, as the endpoint renders it
  private static java.util.List<String> outcomes(
      org.springframework.context.ApplicationContext context) {
    java.util.Map<String, java.util.List<ScheduledRunsSection.Run>> report =
        (java.util.Map<String, java.util.List<ScheduledRunsSection.Run>>)
            context.getBean(ScheduledRunsSection.class).report();
    return report.getOrDefault("ticker", java.util.List.of()).stream()
        .map(ScheduledRunsSection.Run::outcome)
        .toList();
  }

  private long times() {
    return schema
        .dsl()
        .fetchOne("select count(distinct scheduled_at) from ticks")
        .get(0, Long.class);
  }

  private long rows() {
    return schema.dsl().fetchOne("select count(*) from ticks").get(0, Long.class);
  }

  @Test
  void twoInstancesRunEachScheduledTimeOnce() {
    instance("a")
        .withBean(Ticker.class)
        .run(
            a ->
                instance("b")
                    .withBean(Ticker.class)
                    .run(
                        b -> {
                          assertThat(a).hasNotFailed();
                          assertThat(b).hasNotFailed();
                          await().atMost(Duration.ofSeconds(30)).until(() -> times() >= 4);
                          // Both instances competed for the times: each saw outcomes of its own
                          // (a run it finished, or a claim the other won), as the nolock
                          // endpoint shows them.
                          assertThat(outcomes(a)).isNotEmpty();
                          assertThat(outcomes(b)).isNotEmpty();
                          java.util.List<String> both = new java.util.ArrayList<>(outcomes(a));
                          both.addAll(outcomes(b));
                          assertThat(both)
                              .as("a claim lost to the other instance")
                              .contains("LostClaim");
                        }));
    assertThat(rows()).isEqualTo(times());
  }

  @Test
  void theControlSpringsOwnSchedulingOnTwoInstancesRunsATimeTwice() {
    instance("a")
        .withUserConfiguration(SpringScheduling.class)
        .withBean(SpringTicker.class)
        .run(
            a ->
                instance("b")
                    .withUserConfiguration(SpringScheduling.class)
                    .withBean(SpringTicker.class)
                    .run(
                        b -> {
                          assertThat(a).hasNotFailed();
                          assertThat(b).hasNotFailed();
                          await()
                              .atMost(Duration.ofSeconds(30))
                              .untilAsserted(
                                  () ->
                                      assertThat(rows())
                                          .as("rows, against %d scheduled times", times())
                                          .isGreaterThan(times()));
                        }));
  }

  @Test
  void theWritesOfARunThatThrowsRollBackWithTheRun() {
    Ticker.failedRuns = new CountDownLatch(2);
    instance("a")
        .withPropertyValues("ticker.fail=true", "nolock.schedule.jobs.ticker.max-attempts=1")
        .withBean(Ticker.class)
        .run(context -> assertThat(Ticker.failedRuns.await(30, TimeUnit.SECONDS)).isTrue());
    // Runs are sequential: the first run had rolled back before the second one counted down.
    assertThat(rows()).isZero();
  }

  @Test
  void theControlAWriteTheBindingDoesNotReachStaysAfterTheRunThrew() {
    Ticker.failedRuns = new CountDownLatch(2);
    JdbcTemplate unbound = new JdbcTemplate(new DriverManagerDataSource(schema.jdbcUrl()));
    instance("a")
        .withPropertyValues("nolock.schedule.jobs.ticker.max-attempts=1")
        .withBean(Ticker.class, () -> new Ticker(unbound, "a", true))
        .run(context -> assertThat(Ticker.failedRuns.await(30, TimeUnit.SECONDS)).isTrue());
    assertThat(rows()).isPositive();
  }
}
