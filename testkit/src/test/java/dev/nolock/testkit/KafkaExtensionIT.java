package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(KafkaExtension.class)
class KafkaExtensionIT {

  @Test
  void recordProducedToACreatedTopicIsConsumedFromTheBeginning(KafkaBroker broker)
      throws Exception {
    String topic = broker.createTopic(broker.uniqueTopicName("roundtrip"), 1);
    assertThat(broker.admin().listTopics().names().get()).contains(topic);

    RecordMetadata sent;
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(
            Map.of(
                ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
                broker.bootstrapServers(),
                ProducerConfig.ACKS_CONFIG,
                "all"),
            new StringSerializer(),
            new StringSerializer())) {
      sent = producer.send(new ProducerRecord<>(topic, "order-1", "paid")).get();
    }

    List<ConsumerRecord<String, String>> received = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(
            Map.of(
                ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
                broker.bootstrapServers(),
                ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
                false),
            new StringDeserializer(),
            new StringDeserializer())) {
      // assign() instead of a group subscription: no rebalance to wait for.
      TopicPartition partition = new TopicPartition(topic, 0);
      consumer.assign(List.of(partition));
      consumer.seekToBeginning(List.of(partition));
      await()
          .atMost(Duration.ofSeconds(30))
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(received::add);
                return !received.isEmpty();
              });
    }

    assertThat(received)
        .singleElement()
        .satisfies(
            record -> {
              assertThat(record.key()).isEqualTo("order-1");
              assertThat(record.value()).isEqualTo("paid");
              assertThat(record.offset()).isEqualTo(sent.offset());
            });
  }

  @Test
  void topicNamesAreUniquePerCallAndACreatedTopicCannotBeCreatedTwice(KafkaBroker broker) {
    String first = broker.uniqueTopicName("dup");
    String second = broker.uniqueTopicName("dup");
    assertThat(first).isNotEqualTo(second).matches("dup-[0-9a-f]{12}-\\d+");

    broker.createTopic(first, 2);

    assertThatThrownBy(() -> broker.createTopic(first, 2))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("exists already");
  }
}
