package dev.nolock.spring.actuator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.autoconfigure.NolockActuatorAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.spring.internal.QueueWorkers;
import dev.nolock.spring.internal.QueuesHealth;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** A queue's health: DOWN past its max ready age, and when its pool stopped. */
@ExtendWith(PostgresExtension.class)
class QueuesHealthIT {

  record Task(int n) {}

  static CountDownLatch started;
  static CountDownLatch release;

  private final PostgresSchema schema;
  private final ApplicationContextRunner runner;

  QueuesHealthIT(PostgresSchema schema) {
    this.schema = schema;
    this.runner =
        new ApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    JacksonAutoConfiguration.class,
                    NolockAutoConfiguration.class,
                    NolockQueueAutoConfiguration.class,
                    NolockActuatorAutoConfiguration.class))
            .withUserConfiguration(Handler.class)
            .withPropertyValues(
                "spring.datasource.url=" + schema.jdbcUrl(),
                "nolock.create-tables=true",
                // One job at a time: while the first runs, the second waits as a ready job.
                "nolock.queue.queues.slow.concurrency=1",
                "nolock.queue.queues.slow.batch-size=1",
                "nolock.queue.queues.slow.poll-interval=100ms");
  }

  @BeforeEach
  void reset() {
    schema.dsl().execute("drop table if exists nolock_jobs");
    started = new CountDownLatch(1);
    release = new CountDownLatch(1);
  }

  @Configuration(proxyBeanMethods = false)
  static class Handler {

    @Bean
    Slow slow() {
      return new Slow();
    }
  }

  static class Slow {

    @JobHandler("slow")
    void run(Task task) throws InterruptedException {
      started.countDown();
      release.await(30, TimeUnit.SECONDS);
    }
  }

  /** Blocks the only worker on one job and leaves a second one ready. */
  private static HealthIndicator backlog(AssertableApplicationContext context) throws Exception {
    JobQueue<Task> slow = context.getBean(JobQueues.class).queue("slow", Task.class);
    slow.enqueue(NewJob.of(new Task(1)));
    assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
    slow.enqueue(NewJob.of(new Task(2)));
    return (HealthIndicator) context.getBean(QueuesHealth.class).getContributor("slow");
  }

  @Test
  void aQueueIsDownWhileItsOldestReadyJobIsOlderThanTheThreshold() {
    runner
        .withPropertyValues("nolock.queue.queues.slow.health.max-ready-age=200ms")
        .run(
            context -> {
              HealthIndicator slow = backlog(context);
              try {
                await()
                    .atMost(Duration.ofSeconds(20))
                    .until(() -> slow.health().getStatus().equals(Status.DOWN));
                Health down = slow.health();
                assertThat(down.getDetails())
                    .containsEntry("running", true)
                    .containsEntry("readyJobs", 1L)
                    .containsEntry("maxReadyAge", "PT0.2S");
              } finally {
                release.countDown();
              }
            });
  }

  /**
   * Negative control: the same backlog, older than the threshold above, with no threshold set, is
   * UP; the same queue is DOWN once its pool stopped.
   */
  @Test
  void withoutAThresholdTheSameBacklogIsUpAndAStoppedPoolIsDown() {
    runner.run(
        context -> {
          HealthIndicator slow = backlog(context);
          try {
            await()
                .atMost(Duration.ofSeconds(20))
                .until(
                    () -> {
                      Object age = slow.health().getDetails().get("oldestReadyAge");
                      return age != null
                          && Duration.parse(age.toString()).compareTo(Duration.ofMillis(200)) > 0;
                    });
            Health up = slow.health();
            assertThat(up.getStatus()).isEqualTo(Status.UP);
            assertThat(up.getDetails()).containsEntry("readyJobs", 1L);
          } finally {
            release.countDown();
          }
          context.getBean(QueueWorkers.class).stop();
          Health stopped = slow.health();
          assertThat(stopped.getStatus()).isEqualTo(Status.DOWN);
          assertThat(stopped.getDetails()).containsEntry("running", false);
        });
  }

  @Test
  void aMaxReadyAgeThatIsNotPositiveFailsStartUpNamingTheProperty() {
    runner
        .withPropertyValues("nolock.queue.queues.slow.health.max-ready-age=0s")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.queue.queues.slow.health.max-ready-age: must be positive"));
  }
}
