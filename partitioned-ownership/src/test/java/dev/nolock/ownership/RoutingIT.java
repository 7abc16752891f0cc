package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.IntegerDeserializer;
import org.apache.kafka.common.serialization.IntegerSerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The router against the broker: records sent with a key and no partition land where the default
 * partitioner puts them; that is the partition {@link KeyRouter} computes, and where it sends.
 */
@ExtendWith(KafkaExtension.class)
class RoutingIT {

  @Test
  void theRouterPicksThePartitionTheBrokerAssignsToAKeyedRecordWithoutAPartition(KafkaBroker kafka)
      throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("routing"), 6);
    KeyRouter<String> router = KeyRouter.create(topic, 6, new StringSerializer());
    List<String> keys =
        IntStream.range(0, 300).mapToObj(i -> "customer-" + i + "-é").collect(Collectors.toList());
    keys.add("");

    Map<String, Integer> byDefaultPartitioner = new HashMap<>();
    Map<String, Integer> byRouter = new HashMap<>();
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(producerProps(kafka), new StringSerializer(), new StringSerializer())) {
      for (String key : keys) {
        RecordMetadata acked = producer.send(new ProducerRecord<>(topic, key, "default")).get();
        byDefaultPartitioner.put(key, acked.partition());
        byRouter.put(key, router.send(producer, key, "router").get().partition());
      }
    }

    for (String key : keys) {
      int expected = KeyRouter.partitionFor(key.getBytes(StandardCharsets.UTF_8), 6);
      assertThat(byDefaultPartitioner.get(key))
          .as("broker-assigned partition of " + key)
          .isEqualTo(expected);
      assertThat(router.partitionOf(key)).isEqualTo(expected);
      assertThat(byRouter.get(key)).isEqualTo(expected);
    }
    assertThat(byDefaultPartitioner.values().stream().distinct().count())
        .as("300 keys spread over all 6 partitions")
        .isEqualTo(6);

    // Read back what the broker stored: every record sits on its key's partition.
    List<ConsumerRecord<String, String>> stored = readAll(kafka, topic, 6, 2 * keys.size());
    assertThat(stored).hasSize(2 * keys.size());
    for (ConsumerRecord<String, String> record : stored) {
      assertThat(record.partition())
          .as(record.value() + " record of " + record.key())
          .isEqualTo(router.partitionOf(record.key()));
    }
  }

  @Test
  void theHashIsOverTheSerializedKeySoOtherKeyTypesRouteLikeTheDefaultPartitionerToo(
      KafkaBroker kafka) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("routing-int"), 5);
    KeyRouter<Integer> router = KeyRouter.create(topic, 5, new IntegerSerializer());
    try (KafkaProducer<Integer, String> producer =
        new KafkaProducer<>(
            producerProps(kafka), new IntegerSerializer(), new StringSerializer())) {
      for (int key = -50; key < 50; key++) {
        RecordMetadata acked = producer.send(new ProducerRecord<>(topic, key, "v")).get();
        assertThat(acked.partition())
            .as("partition of key " + key)
            .isEqualTo(router.partitionOf(key));
      }
    }
    try (KafkaConsumer<Integer, String> consumer =
        new KafkaConsumer<>(
            consumerProps(kafka), new IntegerDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps = partitions(topic, 5);
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      List<ConsumerRecord<Integer, String>> stored = new ArrayList<>();
      Awaitility.await("100 records read back")
          .atMost(Duration.ofSeconds(30))
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(stored::add);
                return stored.size() >= 100;
              });
      stored.forEach(r -> assertThat(r.partition()).isEqualTo(router.partitionOf(r.key())));
    }
  }

  private static List<ConsumerRecord<String, String>> readAll(
      KafkaBroker kafka, String topic, int partitions, int expected) {
    List<ConsumerRecord<String, String>> stored = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(
            consumerProps(kafka), new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps = partitions(topic, partitions);
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Awaitility.await(expected + " records read back")
          .atMost(Duration.ofSeconds(30))
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(stored::add);
                return stored.size() >= expected;
              });
    }
    return stored;
  }

  private static List<TopicPartition> partitions(String topic, int count) {
    return IntStream.range(0, count).mapToObj(p -> new TopicPartition(topic, p)).toList();
  }

  private static Properties producerProps(KafkaBroker kafka) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.LINGER_MS_CONFIG, 0);
    return props;
  }

  private static Properties consumerProps(KafkaBroker kafka) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    return props;
  }
}
