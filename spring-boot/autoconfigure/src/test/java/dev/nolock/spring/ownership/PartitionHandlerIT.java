package dev.nolock.spring.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.PartitionHandler;
import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockOwnershipAutoConfiguration;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcTemplateAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * A {@code @PartitionHandler} method's {@code JdbcTemplate} writes go into the record's apply
 * transaction: every record applied once with its owner epoch, and a record whose method throws
 * after writing leaves nothing. The control writes through a {@code JdbcTemplate} the binding does
 * not reach, and the write of the failed record stays.
 */
@ExtendWith({PostgresExtension.class, KafkaExtension.class})
class PartitionHandlerIT {

  private final PostgresSchema schema;
  private final KafkaBroker kafka;

  PartitionHandlerIT(PostgresSchema schema, KafkaBroker kafka) {
    this.schema = schema;
    this.kafka = kafka;
  }

  /** Records each value it applies, then fails on "poison". */
  static class Ledger {
    private final JdbcTemplate jdbc;

    Ledger(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, String> record, FencingToken epoch) {
      jdbc.update(
          "insert into deposits_applied (v, epoch) values (?, ?)", record.value(), epoch.value());
      if (record.value().equals("poison")) {
        throw new IllegalStateException("the handler fails after its write");
      }
    }
  }

  @BeforeEach
  void table() {
    schema.dsl().execute("drop table if exists deposits_applied");
    // No unique key on v: a record applied twice must show as two rows.
    schema.dsl().execute("create table deposits_applied (v text not null, epoch bigint not null)");
  }

  private ApplicationContextRunner runner(String topic) {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                JdbcTemplateAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockOwnershipAutoConfiguration.class))
        .withPropertyValues(
            "spring.datasource.url=" + schema.jdbcUrl(),
            "nolock.create-tables=true",
            "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
            "nolock.ownership.owners.deposits.topic=" + topic,
            "nolock.ownership.owners.deposits.group-id=" + topic,
            "nolock.ownership.owners.deposits.close-timeout=5s");
  }

  private void send(String topic, List<String> values) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      // One key: one partition, so the records apply in this order.
      values.forEach(v -> producer.send(new ProducerRecord<>(topic, "account-1", v)));
      producer.flush();
    }
  }

  private List<String> applied() {
    return schema
        .dsl()
        .fetch("select v from deposits_applied order by v")
        .getValues(0, String.class);
  }

  @Test
  void eachRecordIsAppliedOnceWithItsOwnerEpoch() {
    String topic = kafka.createTopic(kafka.uniqueTopicName("deposits"), 2);
    List<String> values = List.of("v01", "v02", "v03", "v04", "v05", "v06", "v07", "v08");
    send(topic, values);
    runner(topic)
        .withBean(Ledger.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              await().atMost(Duration.ofSeconds(60)).until(() -> applied().size() >= values.size());
              assertThat(applied()).containsExactlyElementsOf(values);
              assertThat(schema.dsl().fetchValue("select min(epoch) from deposits_applied"))
                  .asString()
                  .isNotEqualTo("0");
            });
  }

  @Test
  void theWriteOfARecordWhoseMethodThrowsRollsBackWithTheApply() {
    String topic = kafka.createTopic(kafka.uniqueTopicName("deposits"), 1);
    send(topic, List.of("a", "poison", "b"));
    runner(topic)
        .withBean(Ledger.class)
        .run(
            context -> {
              PartitionOwners owners = context.getBean(PartitionOwners.class);
              await()
                  .atMost(Duration.ofSeconds(60))
                  .until(() -> owners.owner("deposits").failure().isDefined());
              assertThat(applied()).containsExactly("a");
            });
  }

  @Test
  void theControlAWriteTheBindingDoesNotReachStaysAfterTheMethodThrew() {
    String topic = kafka.createTopic(kafka.uniqueTopicName("deposits"), 1);
    send(topic, List.of("a", "poison", "b"));
    runner(topic)
        .withBean(Ledger.class, () -> new Ledger(new JdbcTemplate(schemaDataSource())))
        .run(
            context -> {
              PartitionOwners owners = context.getBean(PartitionOwners.class);
              await()
                  .atMost(Duration.ofSeconds(60))
                  .until(() -> owners.owner("deposits").failure().isDefined());
              // The owner retries nothing after a handler's failure, so "poison" was written once,
              // outside the rolled-back apply.
              assertThat(applied()).containsExactly("a", "poison");
            });
  }

  /** A DataSource of its own: the binding is keyed by the application's, so it never reaches it. */
  private DataSource schemaDataSource() {
    return new DriverManagerDataSource(schema.jdbcUrl());
  }
}
