package dev.nolock.spring.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.queue.Completion;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.Record3;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.event.ContextClosedEvent;
import org.springframework.context.event.EventListener;

/** {@code @JobHandler} beans run by the starter's worker pools, and the pools' shutdown. */
@ExtendWith(PostgresExtension.class)
class QueueWorkersIT {

  record Receipt(String order, long cents) {}

  static final Map<String, AtomicInteger> RUNS = new ConcurrentHashMap<>();
  static CountDownLatch started;
  static CountDownLatch release;
  static CountDownLatch closing;

  private final PostgresSchema schema;
  private final ApplicationContextRunner runner;

  QueueWorkersIT(PostgresSchema schema) {
    this.schema = schema;
    this.runner =
        new ApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    JacksonAutoConfiguration.class,
                    NolockAutoConfiguration.class,
                    NolockQueueAutoConfiguration.class))
            .withPropertyValues(
                "spring.datasource.url=" + schema.jdbcUrl(),
                "nolock.create-tables=true",
                "nolock.queue.queues.receipts.poll-interval=100ms",
                "nolock.queue.queues.ledger.poll-interval=100ms",
                "nolock.queue.queues.slow.poll-interval=100ms");
  }

  @BeforeEach
  void reset() {
    schema.dsl().execute("drop table if exists nolock_jobs");
    schema.dsl().execute("drop table if exists ledger");
    schema.dsl().execute("create table ledger (job_id bigint, cents bigint)");
    RUNS.clear();
    started = new CountDownLatch(1);
    release = new CountDownLatch(1);
    closing = new CountDownLatch(1);
  }

  @Test
  void aHandlerMethodRunsEachJobOnceWithItsJsonPayload() {
    runner
        .withUserConfiguration(ReceiptHandlers.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              JobQueue<Receipt> receipts =
                  context.getBean(JobQueues.class).queue("receipts", Receipt.class);
              for (int i = 1; i <= 5; i++) {
                receipts.enqueue(NewJob.of(new Receipt("order-" + i, i * 100L)));
              }
              await().atMost(Duration.ofSeconds(30)).until(() -> done("receipts") == 5);
              assertThat(RUNS)
                  .containsOnlyKeys("order-1", "order-2", "order-3", "order-4", "order-5");
              assertThat(RUNS.values()).allSatisfy(runs -> assertThat(runs).hasValue(1));
              assertThat(
                      schema
                          .dsl()
                          .fetchCount(
                              DSL.table("nolock_jobs"),
                              DSL.condition("queue = 'receipts' and attempt <> 1")))
                  .isZero();
            });
  }

  @Test
  void aHandlerReturningCompleteWithWritesItsLedgerRowInTheJobsTransaction() {
    runner
        .withUserConfiguration(ReceiptHandlers.class)
        .run(
            context -> {
              JobQueue<Receipt> ledger =
                  context.getBean(JobQueues.class).queue("ledger", Receipt.class);
              for (int i = 1; i <= 3; i++) {
                ledger.enqueue(NewJob.of(new Receipt("order-" + i, i * 100L)));
              }
              await().atMost(Duration.ofSeconds(30)).until(() -> done("ledger") == 3);
              assertThat(
                      schema
                          .dsl()
                          .fetch(
                              "select j.id, count(l.job_id), sum(l.cents) from nolock_jobs j"
                                  + " left join ledger l on l.job_id = j.id"
                                  + " where j.queue = 'ledger' group by j.id"))
                  .hasSize(3)
                  .allSatisfy(r -> assertThat(r.get(1, Integer.class)).isEqualTo(1));
              assertThat(schema.dsl().fetchValue("select sum(cents) from ledger").toString())
                  .isEqualTo("600");
            });
  }

  @Test
  void closingTheContextLetsTheJobInFlightCompleteAndLeavesNoWorkerThread() {
    runner
        .withUserConfiguration(SlowHandler.class)
        .run(
            context -> {
              context.getBean(JobQueues.class).queue("slow", String.class).enqueue(NewJob.of("x"));
              assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
              Thread closer = new Thread(context::close);
              closer.start();
              assertThat(closing.await(30, TimeUnit.SECONDS)).isTrue();
              release.countDown();
              closer.join();
              assertThat(slowJob().value1()).isEqualTo("done");
              awaitNoThreadOf("slow");
            });
  }

  @Test
  void closingTheContextPastTheShutdownTimeoutHandsTheJobBack() {
    runner
        .withUserConfiguration(SlowHandler.class)
        .withPropertyValues("nolock.queue.queues.slow.shutdown-timeout=0s")
        .run(
            context -> {
              context.getBean(JobQueues.class).queue("slow", String.class).enqueue(NewJob.of("x"));
              assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();
              context.close();
              Record3<String, Long, Integer> job = slowJob();
              assertThat(job.value1()).as("handed back").isEqualTo("ready");
              assertThat(job.value2()).as("attempt").isEqualTo(1L);
              assertThat(job.value3()).as("no failure counted").isZero();
              awaitNoThreadOf("slow");
            });
  }

  private Record3<String, Long, Integer> slowJob() {
    return schema
        .dsl()
        .select(
            DSL.field("state", String.class),
            DSL.field("attempt", Long.class),
            DSL.field("failures", Integer.class))
        .from("nolock_jobs")
        .where("queue = 'slow'")
        .fetchSingle();
  }

  private static void awaitNoThreadOf(String queue) {
    await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                Thread.getAllStackTraces().keySet().stream()
                    .noneMatch(
                        t -> t.isAlive() && t.getName().startsWith("nolock-queue-" + queue + "-")));
  }

  private int done(String queue) {
    return schema
        .dsl()
        .fetchCount(DSL.table("nolock_jobs"), DSL.condition("queue = ? and state = 'done'", queue));
  }

  @Configuration(proxyBeanMethods = false)
  static class ReceiptHandlers {

    @JobHandler("receipts")
    void receipt(Receipt receipt) {
      RUNS.computeIfAbsent(receipt.order(), o -> new AtomicInteger()).incrementAndGet();
    }

    @JobHandler("ledger")
    Completion ledger(Job<Receipt> job) {
      return Completion.completeWith(
          tx -> tx.execute("insert into ledger values (?, ?)", job.id(), job.payload().cents()));
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class SlowHandler {

    @JobHandler("slow")
    void slow(String payload) throws InterruptedException {
      started.countDown();
      release.await();
    }

    @Bean
    Closing closingListener() {
      return new Closing();
    }
  }

  static class Closing {
    @EventListener
    void closing(ContextClosedEvent event) {
      closing.countDown();
    }
  }
}
