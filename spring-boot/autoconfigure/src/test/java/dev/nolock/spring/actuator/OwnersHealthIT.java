package dev.nolock.spring.actuator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.PartitionHandler;
import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.autoconfigure.NolockActuatorAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockOwnershipAutoConfiguration;
import dev.nolock.spring.internal.OwnersHealth;
import dev.nolock.spring.internal.OwnersSection;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcTemplateAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.core.JdbcTemplate;
import tools.jackson.databind.json.JsonMapper;

/**
 * A partition owner's health and its part of the {@code nolock} endpoint: UP with the partition it
 * owns and the epoch its handler writes with; DOWN once a record stopped it, naming the failure's
 * class but never the record, which the failure's messages quote.
 */
@ExtendWith({PostgresExtension.class, KafkaExtension.class})
class OwnersHealthIT {

  static final String SECRET = "SECRET-RECORD-5d21e8";

  private final PostgresSchema schema;
  private final KafkaBroker kafka;
  private final JsonMapper json = JsonMapper.builder().build();

  OwnersHealthIT(PostgresSchema schema, KafkaBroker kafka) {
    this.schema = schema;
    this.kafka = kafka;
  }

  /** Records each value with its epoch; refuses a value holding the secret, quoting it. */
  static class Ledger {
    private final JdbcTemplate jdbc;

    Ledger(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, String> record, FencingToken epoch) {
      if (record.value().contains(SECRET)) {
        throw new IllegalStateException("refused " + record.value());
      }
      jdbc.update(
          "insert into deposits_applied (v, epoch) values (?, ?)", record.value(), epoch.value());
    }
  }

  @BeforeEach
  void table() {
    schema.dsl().execute("drop table if exists deposits_applied");
    schema.dsl().execute("create table deposits_applied (v text not null, epoch bigint not null)");
  }

  private void send(String topic, String value) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      producer.send(new ProducerRecord<>(topic, "account-1", value));
      producer.flush();
    }
  }

  @Test
  void upWithItsPartitionAndEpochThenDownNamingOnlyTheFailuresClass() {
    String topic = kafka.createTopic(kafka.uniqueTopicName("deposits"), 1);
    send(topic, "a");
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                JdbcTemplateAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockOwnershipAutoConfiguration.class,
                NolockActuatorAutoConfiguration.class))
        .withBean(Ledger.class)
        .withPropertyValues(
            "spring.datasource.url=" + schema.jdbcUrl(),
            "nolock.create-tables=true",
            "spring.kafka.bootstrap-servers=" + kafka.bootstrapServers(),
            "nolock.ownership.owners.deposits.topic=" + topic,
            "nolock.ownership.owners.deposits.group-id=" + topic,
            "nolock.ownership.owners.deposits.close-timeout=5s")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              HealthIndicator indicator =
                  (HealthIndicator) context.getBean(OwnersHealth.class).getContributor("deposits");
              OwnersSection section = context.getBean(OwnersSection.class);
              await()
                  .atMost(Duration.ofSeconds(60))
                  .until(
                      () ->
                          schema.dsl().fetchCount(schema.dsl().selectFrom("deposits_applied"))
                              == 1);
              long epoch =
                  ((Number) schema.dsl().fetchValue("select epoch from deposits_applied"))
                      .longValue();

              Health up = indicator.health(true);
              assertThat(up.getStatus()).isEqualTo(Status.UP);
              assertThat(up.getDetails().get("partitions")).isEqualTo(Map.of(0, epoch));
              assertThat(section.report())
                  .isEqualTo(
                      List.of(new OwnersSection.Owner("deposits", true, Map.of(0, epoch), null)));

              send(topic, "b " + SECRET);
              PartitionOwners owners = context.getBean(PartitionOwners.class);
              await()
                  .atMost(Duration.ofSeconds(60))
                  .until(() -> owners.owner("deposits").failure().isDefined());
              Throwable failure = owners.owner("deposits").failure().get();
              await()
                  .atMost(Duration.ofSeconds(30))
                  .until(() -> !owners.owner("deposits").isRunning());

              Health down = indicator.health(true);
              assertThat(down.getStatus()).isEqualTo(Status.DOWN);
              assertThat(down.getDetails())
                  .containsEntry("running", false)
                  .containsEntry("failure", failure.getClass().getName());
              String shown = json.writeValueAsString(List.of(down, section.report()));
              assertThat(shown).doesNotContain(SECRET);

              // Negative control: the failure's messages quote the record, so the search above
              // would find the secret had the indicator or the section shown them.
              List<String> messages = new ArrayList<>();
              for (Throwable t = failure; t != null; t = t.getCause()) {
                messages.add(String.valueOf(t.getMessage()));
              }
              assertThat(json.writeValueAsString(List.of(down, messages))).contains(SECRET);
            });
  }
}
