package dev.nolock.spring.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.queue.Completion;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.spring.internal.QueueWorkers;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.NestedExceptionUtils;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * When the queue's beans appear, and what start-up refuses. No server is touched: nothing here
 * opens a connection (a pool connects on first use, and no handler starts).
 */
class NolockQueueAutoConfigurationTest {

  record Receipt(String order, long cents) {}

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  DataSourceAutoConfiguration.class,
                  JacksonAutoConfiguration.class,
                  NolockAutoConfiguration.class,
                  NolockQueueAutoConfiguration.class))
          .withPropertyValues("spring.datasource.url=jdbc:postgresql://127.0.0.1:1/unused");

  @Test
  void theQueueBeansAppearWithTheArtifactAndADataSource() {
    runner.run(
        context -> {
          assertThat(context).hasNotFailed();
          assertThat(context).hasSingleBean(JobQueues.class);
          assertThat(context).hasSingleBean(QueueWorkers.class);
          assertThat(context.getBean(JobQueues.class).queue("receipts", String.class).config())
              .extracting(QueueConfig::table)
              .isEqualTo(QueueConfig.DEFAULT_TABLE);
        });
  }

  @Test
  void noQueueBeansWithoutTheQueueArtifact() {
    runner
        .withClassLoader(new FilteredClassLoader(JobQueue.class))
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).doesNotHaveBean(JobQueues.class);
              assertThat(context).doesNotHaveBean(QueueWorkers.class);
            });
  }

  @Test
  void noQueueBeansWithoutADataSource() {
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                NolockAutoConfiguration.class, NolockQueueAutoConfiguration.class))
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).doesNotHaveBean(JobQueues.class);
              assertThat(context).doesNotHaveBean(QueueWorkers.class);
            });
  }

  @Test
  void noQueueBeansWithTwoDataSources() {
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                NolockAutoConfiguration.class, NolockQueueAutoConfiguration.class))
        .withUserConfiguration(TwoDataSources.class)
        .run(context -> assertThat(context).doesNotHaveBean(JobQueues.class));
  }

  @Test
  void theUsersOwnJobQueuesWins() {
    runner
        .withUserConfiguration(OwnJobQueues.class)
        .run(
            context -> {
              assertThat(context).hasSingleBean(JobQueues.class);
              assertThat(context.getBean(JobQueues.class)).isSameAs(OwnJobQueues.INSTANCE);
            });
  }

  @Test
  void theSettingsComeFromTheProperties() {
    runner
        .withPropertyValues(
            "nolock.queue.table=app_jobs",
            "nolock.queue.queues.receipts.lease=7s",
            "nolock.queue.queues.receipts.max-attempts=3",
            "nolock.queue.queues.receipts.backoff-base=2s",
            "nolock.queue.queues.receipts.backoff-max=1m")
        .run(
            context -> {
              QueueConfig config =
                  context.getBean(JobQueues.class).queue("receipts", String.class).config();
              assertThat(config.table()).isEqualTo("app_jobs");
              assertThat(config.lease()).isEqualTo(Duration.ofSeconds(7));
              assertThat(config.maxAttempts()).isEqualTo(3);
              assertThat(config.backoffBase()).isEqualTo(Duration.ofSeconds(2));
              assertThat(config.backoffMax()).isEqualTo(Duration.ofMinutes(1));
            });
  }

  @Test
  void aBadValueFailsStartUpNamingTheProperty() {
    assertStartUpFails(
        "nolock.queue.queues.receipts.concurrency=0",
        "nolock.queue.queues.receipts.concurrency: concurrency is the number of handler threads");
    assertStartUpFails(
        "nolock.queue.queues.receipts.lease=10ms",
        "nolock.queue.queues.receipts.lease: The lease must be between 1 s and 1 day");
    assertStartUpFails(
        "nolock.queue.queues.receipts.batch-size=5000",
        "nolock.queue.queues.receipts.batch-size: batchSize must be 1 to 1000");
    assertStartUpFails(
        "nolock.queue.queues.receipts.shutdown-timeout=2h",
        "nolock.queue.queues.receipts.shutdown-timeout: shutdownTimeout must be between");
    assertStartUpFails(
        "nolock.queue.queues.receipts.backoff-max=1ms",
        "nolock.queue.queues.receipts.backoff-max: ");
    assertStartUpFails("nolock.queue.table=Bad-Table", "nolock.queue.table: ");
    String tooLong = "q".repeat(QueueConfig.MAX_QUEUE_NAME_LENGTH + 1);
    assertStartUpFails(
        "nolock.queue.queues." + tooLong + ".lease=5s",
        "nolock.queue.queues." + tooLong + ": The queue name is");
  }

  private void assertStartUpFails(String property, String message) {
    runner
        .withPropertyValues(property)
        .run(
            context ->
                assertThat(messages(context.getStartupFailure()))
                    .anySatisfy(m -> assertThat(m).startsWith(message)));
  }

  /** The messages of {@code failure} and its causes. */
  private static List<String> messages(Throwable failure) {
    List<String> messages = new ArrayList<>();
    for (Throwable t = failure; t != null; t = t.getCause()) {
      messages.add(t.getMessage());
    }
    return messages;
  }

  /** The message of the start-up failure's deepest cause. */
  private static String deepest(AssertableApplicationContext context) {
    assertThat(context).hasFailed();
    return NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()).getMessage();
  }

  @Test
  void oneQueueNameWithTwoPayloadTypesIsRefused() {
    runner.run(
        context -> {
          JobQueues queues = context.getBean(JobQueues.class);
          assertThat(queues.queue("receipts", String.class))
              .isSameAs(queues.queue("receipts", String.class));
          assertThatThrownBy(() -> queues.queue("receipts", byte[].class))
              .isInstanceOf(IllegalArgumentException.class)
              .hasMessageContaining("\"receipts\" is used with payload type java.lang.String")
              .hasMessageContaining("now asked for with [B");
        });
  }

  @Test
  void aJsonPayloadWithoutAMapperIsRefusedNamingTheQueue() {
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockQueueAutoConfiguration.class))
        .withPropertyValues("spring.datasource.url=jdbc:postgresql://127.0.0.1:1/unused")
        .withUserConfiguration(ReceiptMethod.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains(
                        "@JobHandler on bean 'nolockQueueAutoConfigurationTest.ReceiptMethod',"
                            + " method ")
                    .contains("handle(" + Receipt.class.getName() + ")")
                    .contains("\"receipts\" has payloads of type")
                    .contains("no Jackson JsonMapper bean"));
  }

  @Test
  void twoHandlersForOneQueueFailStartUpNamingBoth() {
    runner
        .withUserConfiguration(ReceiptMethod.class, ReceiptBean.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains("\"receipts\" has a handler already")
                    .contains("nolockQueueAutoConfigurationTest.ReceiptMethod', method")
                    .contains("bean 'receiptBean'"));
  }

  @Test
  void aHandlerMethodWithAWrongSignatureFailsStartUp() {
    runner
        .withUserConfiguration(TwoParameters.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains(
                        "@JobHandler on bean 'nolockQueueAutoConfigurationTest.TwoParameters',"
                            + " method ")
                    .contains("handle(java.lang.String,int)")
                    .contains("takes one parameter"));
    runner
        .withUserConfiguration(ReturnsString.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains(
                        "@JobHandler on bean 'nolockQueueAutoConfigurationTest.ReturnsString',"
                            + " method ")
                    .contains("returns dev.nolock.queue.Completion or void"));
    runner
        .withUserConfiguration(RawJob.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains(
                        "@JobHandler on bean 'nolockQueueAutoConfigurationTest.RawJob', method ")
                    .contains("payload type cannot be resolved"));
  }

  @Test
  void aHandlerForAnInvalidQueueNameFailsStartUp() {
    runner
        .withUserConfiguration(InvalidQueueName.class)
        .run(
            context ->
                assertThat(deepest(context))
                    .contains(
                        "@JobHandler on bean 'nolockQueueAutoConfigurationTest.InvalidQueueName',"
                            + " method ")
                    .contains("The queue name is blank"));
  }

  @Test
  void anInterfaceBeanNamesItsQueueOnItsBeanMethodAndItsPayloadTypeIsResolved() {
    runner
        .withUserConfiguration(ReceiptBean.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              JobQueues queues = context.getBean(JobQueues.class);
              assertThatThrownBy(() -> queues.queue("receipts", String.class))
                  .hasMessageContaining("is used with payload type " + Receipt.class.getName());
            });
  }

  @Test
  void anInterfaceBeanNamesItsQueueOnItsClass() {
    runner
        .withBean(ReceiptClass.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThatThrownBy(
                      () -> context.getBean(JobQueues.class).queue("receipts", String.class))
                  .hasMessageContaining("is used with payload type " + Receipt.class.getName());
            });
  }

  @JobHandler("receipts")
  static class ReceiptClass implements dev.nolock.queue.JobHandler<Receipt> {
    @Override
    public Completion handle(Job<Receipt> job) {
      return Completion.complete();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoDataSources {
    @Bean
    DriverManagerDataSource one() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/one");
    }

    @Bean
    DriverManagerDataSource two() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/two");
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class OwnJobQueues {
    static final JobQueues INSTANCE =
        new JobQueues(
            new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/own"),
            QueueConfig::ofDefaults,
            new JobQueues.Codecs() {
              @Override
              public <T> PayloadCodec<T> forType(String queue, Class<T> type) {
                throw new IllegalArgumentException("not used");
              }
            },
            false);

    @Bean
    JobQueues ownJobQueues() {
      return INSTANCE;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class ReceiptMethod {
    @JobHandler("receipts")
    void handle(Receipt receipt) {}
  }

  @Configuration(proxyBeanMethods = false)
  static class ReceiptBean {
    @Bean
    @JobHandler("receipts")
    dev.nolock.queue.JobHandler<Receipt> receiptBean() {
      return job -> Completion.complete();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class TwoParameters {
    @JobHandler("receipts")
    void handle(String payload, int extra) {}
  }

  @Configuration(proxyBeanMethods = false)
  static class ReturnsString {
    @JobHandler("receipts")
    String handle(String payload) {
      return payload;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class RawJob {
    @JobHandler("receipts")
    @SuppressWarnings("rawtypes")
    Completion handle(Job job) {
      return Completion.complete();
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class InvalidQueueName {
    @JobHandler(" ")
    void handle(String payload) {}
  }
}
