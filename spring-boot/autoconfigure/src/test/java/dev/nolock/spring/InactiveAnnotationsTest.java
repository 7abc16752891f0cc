package dev.nolock.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.spring.autoconfigure.NolockAnnotationsAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockIdempotencyAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockScheduleAutoConfiguration;
import dev.nolock.spring.internal.ScheduledJobs;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.web.bind.annotation.PostMapping;

/**
 * A starter annotation whose auto-configuration did not run (here: two DataSources, none primary;
 * no web application; no lock backend) fails start-up naming the bean, the method and what it
 * needs. The control: without the check, the same context starts and the method would never run.
 */
class InactiveAnnotationsTest {

  @Configuration(proxyBeanMethods = false)
  static class TwoDataSources {
    @Bean
    DataSource orders() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/orders");
    }

    @Bean
    DataSource audit() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/audit");
    }
  }

  static class Nightly {
    @FencedScheduled(name = "nightly", cron = "0 0 2 * * *")
    void run() {}
  }

  static class Receipts {
    @JobHandler("receipts")
    void send(String receipt) {}
  }

  static class Orders {
    @Idempotent
    @PostMapping("/orders")
    ResponseEntity<String> place() {
      return ResponseEntity.ok("placed");
    }
  }

  static class Listener implements LeadershipListener {
    @Override
    public String election() {
      return "billing";
    }

    @Override
    public void startedLeading(dev.nolock.lock.HeldLock term) {}

    @Override
    public void stoppedLeading(dev.nolock.patterns.FencingToken token) {}
  }

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  NolockAnnotationsAutoConfiguration.class,
                  NolockScheduleAutoConfiguration.class,
                  NolockQueueAutoConfiguration.class,
                  NolockIdempotencyAutoConfiguration.class,
                  NolockLeaderAutoConfiguration.class))
          .withUserConfiguration(TwoDataSources.class);

  @Test
  void aFencedScheduledWhoseAutoConfigurationDidNotRunFailsStartUp() {
    runner
        .withBean("nightly", Nightly.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("@FencedScheduled on bean 'nightly', method")
                    .hasStackTraceContaining("Nightly.run")
                    .hasStackTraceContaining(
                        "exactly one DataSource bean (or one marked @Primary)"));
  }

  @Test
  void theControlWithoutTheCheckTheSameContextStartsAndNothingWouldRun() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockScheduleAutoConfiguration.class))
        .withUserConfiguration(TwoDataSources.class)
        .withBean("nightly", Nightly.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).doesNotHaveBean(ScheduledJobs.class);
            });
  }

  @Test
  void aJobHandlerWhoseAutoConfigurationDidNotRunFailsStartUp() {
    runner
        .withBean("receipts", Receipts.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("@JobHandler on bean 'receipts', method"));
  }

  @Test
  void anIdempotentOutsideAServletWebApplicationFailsStartUp() {
    runner
        .withBean("orderApi", Orders.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("@Idempotent on bean 'orderApi', method")
                    .hasStackTraceContaining("a servlet web application"));
  }

  @Test
  void aLeadershipListenerWithoutALockBackendFailsStartUp() {
    runner
        .withBean("listener", LeadershipListener.class, Listener::new)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("LeadershipListener bean 'listener'")
                    .hasStackTraceContaining("nolock.lock.backend"));
  }

  @Test
  void withNothingOfTheStartersInUseTheCheckStaysQuiet() {
    runner.run(context -> assertThat(context).hasNotFailed());
  }
}
