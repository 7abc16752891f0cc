package dev.nolock.ownership;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Utils;

/**
 * Sends a command for a key to the key's partition: the partition Kafka's default partitioner picks
 * for a record with that key, {@code toPositive(murmur2(serializedKey)) % partitions}.
 *
 * <p>Guarantees: {@link #partitionOf(Object)} is the partition the producer's default partitioner
 * would choose for the key (computed with kafka-clients' own {@link Utils#murmur2(byte[])}), so
 * commands sent here and commands sent by any producer with the key and no explicit partition meet
 * on the same partition; {@link #send} refuses to send when the producer's metadata shows a
 * partition count other than the one this router was built with ({@link
 * PartitionCountChangedException}), because then the same key would land elsewhere.
 *
 * <p>The producer's metadata is refreshed every {@code metadata.max.age.ms} (5 minutes by default),
 * so a partition change is seen within that interval; lower it on the producer if that is too long.
 * Immutable and thread-safe when the serializer is.
 *
 * @param <K> the key type
 */
public final class KeyRouter<K> {

  private final String topic;
  private final int partitions;
  private final Serializer<K> keySerializer;

  private KeyRouter(String topic, int partitions, Serializer<K> keySerializer) {
    this.topic = OwnershipConfig.requireTopic(topic);
    if (partitions < 1) {
      throw new IllegalArgumentException(
          "partitions must be at least 1, got "
              + partitions
              + ": pass the topic's partition count");
    }
    this.partitions = partitions;
    this.keySerializer = Objects.requireNonNull(keySerializer, "keySerializer");
  }

  /**
   * A router for {@code topic}, which has {@code partitions} partitions.
   *
   * @param keySerializer the serializer the producer uses for keys: the hash is over its bytes
   */
  public static <K> KeyRouter<K> create(String topic, int partitions, Serializer<K> keySerializer) {
    return new KeyRouter<>(topic, partitions, keySerializer);
  }

  /**
   * The partition Kafka's default partitioner picks for a serialized key among {@code partitions}.
   */
  public static int partitionFor(byte[] serializedKey, int partitions) {
    Objects.requireNonNull(
        serializedKey,
        "serializedKey: a record without a key has no fixed partition; route commands by key");
    if (partitions < 1) {
      throw new IllegalArgumentException("partitions must be at least 1, got " + partitions);
    }
    return Utils.toPositive(Utils.murmur2(serializedKey)) % partitions;
  }

  /** The partition of {@code key} on this router's topic. */
  public int partitionOf(K key) {
    Objects.requireNonNull(key, "key");
    return partitionFor(keySerializer.serialize(topic, key), partitions);
  }

  /** A record for {@code key} with its partition set explicitly. */
  public <V> ProducerRecord<K, V> record(K key, V value) {
    return new ProducerRecord<>(topic, partitionOf(key), key, value);
  }

  /**
   * Sends {@code value} for {@code key} to the key's partition, after checking the partition count
   * in the producer's metadata.
   *
   * @throws PartitionCountChangedException when the topic no longer has the partition count this
   *     router was built with; nothing is sent
   */
  public <V> Future<RecordMetadata> send(Producer<K, V> producer, K key, V value) {
    return send(producer, key, value, null);
  }

  /** As {@link #send(Producer, Object, Object)}, with a completion callback. */
  public <V> Future<RecordMetadata> send(
      Producer<K, V> producer, K key, V value, Callback callback) {
    Objects.requireNonNull(producer, "producer");
    List<PartitionInfo> infos = producer.partitionsFor(topic);
    if (infos.size() != partitions) {
      throw new PartitionCountChangedException(topic, partitions, infos.size());
    }
    return producer.send(record(key, value), callback);
  }

  public String topic() {
    return topic;
  }

  public int partitions() {
    return partitions;
  }

  @Override
  public String toString() {
    return "KeyRouter[" + topic + ", " + partitions + " partitions]";
  }
}
