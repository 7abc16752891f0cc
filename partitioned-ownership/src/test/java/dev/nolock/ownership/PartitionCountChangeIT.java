package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Adding partitions moves keys to other partitions: the runner, a runner started afterwards and the
 * router all refuse to go on.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class PartitionCountChangeIT {

  @Test
  void aRunnerStopsWhenPartitionsAreAddedAndNoRunnerStartsAgainOnTheTopic(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("grows"), 2);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    producerProps.put(ProducerConfig.METADATA_MAX_AGE_CONFIG, 500);
    KeyRouter<String> router = KeyRouter.create(topic, 2, new StringSerializer());

    try (KafkaProducer<String, String> producer =
            new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer());
        PartitionOwner<String, String> owner = owner(kafka, pg, topic, group, "first")) {
      owner.createTableIfMissing();
      owner.start();
      Awaitility.await("the runner owns both partitions")
          .atMost(Duration.ofSeconds(60))
          .until(() -> owner.ownedPartitions().size() == 2);
      router.send(producer, "key-1", "1").get();
      Awaitility.await("the command is applied")
          .atMost(Duration.ofSeconds(30))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 1);

      kafka.admin().createPartitions(Map.of(topic, NewPartitions.increaseTo(3))).all().get();

      Awaitility.await("the runner refuses the grown topic")
          .atMost(Duration.ofSeconds(60))
          .until(() -> !owner.isRunning());
      assertThat(owner.failure().toJavaOptional())
          .get()
          .isInstanceOfSatisfying(
              PartitionCountChangedException.class,
              e -> {
                assertThat(e.recordedPartitions()).isEqualTo(2);
                assertThat(e.actualPartitions()).isEqualTo(3);
                assertThat(e.getMessage()).contains(topic, "has 3 partitions", "set up with 2");
              });
      assertThat(owner.ownedPartitions()).isEmpty();

      // A runner started on the grown topic refuses at once: the count is recorded in the table.
      try (PartitionOwner<String, String> second = owner(kafka, pg, topic, group, "second")) {
        second.start();
        assertThat(second.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(second.failure().toJavaOptional())
            .get()
            .isInstanceOfSatisfying(
                PartitionCountChangedException.class,
                e -> assertThat(e.recordedPartitions()).isEqualTo(2));
      }

      // The router refuses once the producer's metadata shows the third partition.
      Awaitility.await("the producer sees 3 partitions")
          .atMost(Duration.ofSeconds(30))
          .until(() -> producer.partitionsFor(topic).size() == 3);
      assertThatThrownBy(() -> router.send(producer, "key-1", "2"))
          .isInstanceOf(PartitionCountChangedException.class)
          .hasMessageContaining("has 3 partitions");
    }
  }

  private static PartitionOwner<String, String> owner(
      KafkaBroker kafka, PostgresSchema pg, String topic, String group, String id) {
    return PartitionOwner.create(
        pg.dataSource(),
        TestOwners.config(kafka.bootstrapServers(), topic, group, id)
            .consumerProperty("metadata.max.age.ms", 500)
            .build(),
        new StringDeserializer(),
        new StringDeserializer(),
        Bank.handler(id));
  }
}
