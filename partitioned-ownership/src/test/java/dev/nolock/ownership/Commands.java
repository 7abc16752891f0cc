package dev.nolock.ownership;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Commands for the tests: {@code keys} keys ({@code key-000}, ...), each getting its sequence
 * numbers 1, 2, 3, ... in order, keys interleaved in a shuffled order. Sent through a {@link
 * KeyRouter} by an idempotent producer, so per-partition order is the send order and a retry never
 * duplicates.
 */
final class Commands {

  private final KeyRouter<String> router;
  private final KafkaProducer<String, String> producer;
  private final Map<String, Integer> sent = new TreeMap<>();
  private final List<String> keys = new ArrayList<>();
  private final Random random = new Random(42);

  Commands(String bootstrap, String topic, int partitions, int keyCount) {
    this.router = KeyRouter.create(topic, partitions, new StringSerializer());
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    this.producer = new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    for (int i = 0; i < keyCount; i++) {
      keys.add(String.format("key-%03d", i));
    }
  }

  /** Sends {@code count} more commands, spread evenly over the keys, and waits for the acks. */
  void send(int count) {
    send(count, keys);
  }

  /**
   * Sends {@code count} more commands, spread evenly over the keys {@link KeyRouter} routes to
   * {@code partitions}, and waits for the acks.
   */
  void sendTo(Set<Integer> partitions, int count) {
    List<String> routed = new ArrayList<>();
    for (String key : keys) {
      if (partitions.contains(router.partitionOf(key))) {
        routed.add(key);
      }
    }
    if (routed.isEmpty()) {
      throw new IllegalArgumentException("no key routes to partitions " + partitions);
    }
    send(count, routed);
  }

  private void send(int count, List<String> pool) {
    List<String> order = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      if (i % pool.size() == 0) {
        Collections.shuffle(pool, random);
      }
      order.add(pool.get(i % pool.size()));
    }
    List<Future<RecordMetadata>> acks = new ArrayList<>();
    for (String key : order) {
      int seq = sent.merge(key, 1, Integer::sum);
      acks.add(router.send(producer, key, Integer.toString(seq)));
    }
    producer.flush();
    for (Future<RecordMetadata> ack : acks) {
      try {
        ack.get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      } catch (ExecutionException e) {
        throw new IllegalStateException("a command was not acknowledged", e.getCause());
      }
    }
  }

  /** Commands sent per key so far. */
  Map<String, Integer> sent() {
    return Map.copyOf(sent);
  }

  int total() {
    return sent.values().stream().mapToInt(Integer::intValue).sum();
  }

  void close() {
    producer.close();
  }
}
