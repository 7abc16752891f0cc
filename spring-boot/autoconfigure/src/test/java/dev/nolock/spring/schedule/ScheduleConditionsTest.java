package dev.nolock.spring.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.FencingToken;
import dev.nolock.schedule.ScheduledRun;
import dev.nolock.spring.FencedScheduled;
import dev.nolock.spring.autoconfigure.NolockScheduleAutoConfiguration;
import dev.nolock.spring.internal.ScheduledJobs;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.transaction.annotation.Transactional;

/**
 * When the fenced scheduled jobs appear, and how bad declarations fail start-up, naming the bean
 * and method or the property. Every failure here comes before the jobs would start, so no server is
 * needed.
 */
class ScheduleConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(NolockScheduleAutoConfiguration.class));

  @Configuration(proxyBeanMethods = false)
  static class WithDataSource {
    @Bean
    DataSource dataSource() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/never-connected");
    }
  }

  static class Nightly {
    @FencedScheduled(name = "nightly", cron = "${nightly.cron:0 0 2 * * *}", zone = "Europe/Paris")
    void run(ScheduledRun run, FencingToken attempt, DSLContext tx) {}
  }

  static class AlsoNightly {
    @FencedScheduled(name = "nightly", cron = "0 2 * * *")
    void other() {}
  }

  static class BadCron {
    @FencedScheduled(name = "bad", cron = "0 0 25 * * *")
    void run() {}
  }

  static class BadZone {
    @FencedScheduled(name = "bad", cron = "0 0 2 * * *", zone = "Mars/Olympus")
    void run() {}
  }

  static class Unresolved {
    @FencedScheduled(name = "bad", cron = "${no.such.property}")
    void run() {}
  }

  static class BadParameter {
    @FencedScheduled(name = "bad", cron = "0 0 2 * * *")
    void run(String what) {}
  }

  static class TransactionalMethod {
    @Transactional
    @FencedScheduled(name = "bad", cron = "0 0 2 * * *")
    public void run() {}
  }

  @Transactional
  static class TransactionalClass {
    @FencedScheduled(name = "bad", cron = "0 0 2 * * *")
    public void run() {}
  }

  @Test
  void withoutADataSourceThereAreNoJobs() {
    runner.run(context -> assertThat(context).doesNotHaveBean(ScheduledJobs.class));
  }

  @Test
  void aNameUsedTwiceFailsStartUpNamingBothMethods() {
    assertFails(
        AlsoNightly.class,
        "the job name \"nightly\" is used already",
        "AlsoNightly.other",
        "Nightly.run");
  }

  @Test
  void anInvalidCronExpressionFailsStartUpNamingTheMethod() {
    assertFails(
        BadCron.class, "BadCron.run", "the cron expression \"0 0 25 * * *\" does not parse");
  }

  @Test
  void anInvalidZoneFailsStartUpNamingTheMethod() {
    assertFails(BadZone.class, "BadZone.run", "Mars/Olympus");
  }

  @Test
  void anUnresolvablePlaceholderFailsStartUpNamingTheMethod() {
    assertFails(Unresolved.class, "Unresolved.run", "no.such.property");
  }

  @Test
  void anotherParameterFailsStartUpNamingTheMethod() {
    assertFails(BadParameter.class, "BadParameter.run", "it has java.lang.String");
  }

  @Test
  void aTransactionalMethodFailsStartUpSayingWhy() {
    assertFails(TransactionalMethod.class, "TransactionalMethod.run", "is @Transactional");
  }

  @Test
  void aMethodOfATransactionalClassFailsStartUpSayingWhy() {
    assertFails(TransactionalClass.class, "TransactionalClass.run", "is @Transactional");
  }

  @Test
  void settingsForAJobThatDoesNotExistFailStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean("nightly", Nightly.class)
        .withPropertyValues("nolock.schedule.jobs.nigthly.lease=10s")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.schedule.jobs.nigthly names no")
                    .hasStackTraceContaining("[nightly]"));
  }

  @Test
  void aValueTheBuilderRefusesFailsStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean("nightly", Nightly.class)
        .withPropertyValues("nolock.schedule.jobs.nightly.max-attempts=0")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.schedule.jobs.nightly.max-attempts: maxAttempts"));
  }

  @Test
  void theApplicationsOwnScheduledJobsWins() {
    ScheduledJobs own =
        new ScheduledJobs(null, (name, schedule) -> null, java.util.Set.of(), false);
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean(ScheduledJobs.class, () -> own)
        .run(context -> assertThat(context.getBean(ScheduledJobs.class)).isSameAs(own));
  }

  private void assertFails(Class<?> bean, String... expected) {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean("nightly", Nightly.class)
        .withBean("other", bean)
        .run(
            context -> {
              assertThat(context).hasFailed();
              for (String text : expected) {
                assertThat(context.getStartupFailure()).hasStackTraceContaining(text);
              }
            });
  }
}
