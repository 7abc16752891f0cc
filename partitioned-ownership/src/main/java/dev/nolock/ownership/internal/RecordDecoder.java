package dev.nolock.ownership.internal;

import java.nio.ByteBuffer;
import java.util.Objects;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.RecordDeserializationException.DeserializationExceptionOrigin;
import org.apache.kafka.common.serialization.Deserializer;

/**
 * Deserializes the records the runner's consumer fetches as bytes. The runner, not the consumer,
 * runs your deserializers, so that a record they cannot read reaches the apply as a failure of that
 * one record, with its bytes in hand for the dead-letter topic: the consumer would throw from
 * {@code poll} instead, for a record it has no way to hand over.
 *
 * <p>It calls the deserializers as the consumer does: with the topic and the record's headers, and
 * not at all for a null key or value.
 */
public final class RecordDecoder<K, V> implements AutoCloseable {

  private final Deserializer<K> keyDeserializer;
  private final Deserializer<V> valueDeserializer;

  /** One record: deserialized, or the failure that names which part could not be. */
  public record Decoded<K, V>(
      ConsumerRecord<byte[], byte[]> raw,
      ConsumerRecord<K, V> record,
      RecordDeserializationException failure) {}

  public RecordDecoder(Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this.keyDeserializer = Objects.requireNonNull(keyDeserializer, "keyDeserializer");
    this.valueDeserializer = Objects.requireNonNull(valueDeserializer, "valueDeserializer");
  }

  public Decoded<K, V> decode(ConsumerRecord<byte[], byte[]> raw) {
    K key;
    try {
      key =
          raw.key() == null
              ? null
              : keyDeserializer.deserialize(raw.topic(), raw.headers(), ByteBuffer.wrap(raw.key()));
    } catch (RuntimeException e) {
      return new Decoded<>(raw, null, failure(raw, DeserializationExceptionOrigin.KEY, e));
    }
    V value;
    try {
      value =
          raw.value() == null
              ? null
              : valueDeserializer.deserialize(
                  raw.topic(), raw.headers(), ByteBuffer.wrap(raw.value()));
    } catch (RuntimeException e) {
      return new Decoded<>(raw, null, failure(raw, DeserializationExceptionOrigin.VALUE, e));
    }
    return new Decoded<>(
        raw,
        new ConsumerRecord<>(
            raw.topic(),
            raw.partition(),
            raw.offset(),
            raw.timestamp(),
            raw.timestampType(),
            raw.serializedKeySize(),
            raw.serializedValueSize(),
            key,
            value,
            raw.headers(),
            raw.leaderEpoch()),
        null);
  }

  /** Kafka's own exception for it; its message names the partition and offset, not the data. */
  private static RecordDeserializationException failure(
      ConsumerRecord<byte[], byte[]> raw, DeserializationExceptionOrigin origin, Exception e) {
    return new RecordDeserializationException(
        origin,
        new TopicPartition(raw.topic(), raw.partition()),
        raw.offset(),
        raw.timestamp(),
        raw.timestampType(),
        raw.key() == null ? null : ByteBuffer.wrap(raw.key()).asReadOnlyBuffer(),
        raw.value() == null ? null : ByteBuffer.wrap(raw.value()).asReadOnlyBuffer(),
        raw.headers(),
        "Error deserializing "
            + origin
            + " for partition "
            + raw.topic()
            + "-"
            + raw.partition()
            + " at offset "
            + raw.offset(),
        e);
  }

  /** Closes both deserializers, as the consumer would have. */
  @Override
  public void close() {
    try {
      keyDeserializer.close();
    } finally {
      valueDeserializer.close();
    }
  }
}
