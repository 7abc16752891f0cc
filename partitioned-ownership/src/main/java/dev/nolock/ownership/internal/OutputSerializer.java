package dev.nolock.ownership.internal;

import java.util.Objects;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serializer;

/**
 * What {@code KafkaProducer.send} does with its serializers, for the pipeline's producer, which
 * carries bytes so that dead letters can share its transaction. A serializer's exception is thrown
 * as is: {@link PipelineLoop} makes it the input record's failure (stage {@code serializer}),
 * dead-lettered or stopping the pipeline, never a batch aborted and transformed again at once.
 */
public final class OutputSerializer<K, V> implements AutoCloseable {

  private final Serializer<K> keySerializer;
  private final Serializer<V> valueSerializer;

  public OutputSerializer(Serializer<K> keySerializer, Serializer<V> valueSerializer) {
    this.keySerializer = Objects.requireNonNull(keySerializer, "keySerializer");
    this.valueSerializer = Objects.requireNonNull(valueSerializer, "valueSerializer");
  }

  public ProducerRecord<byte[], byte[]> serialize(ProducerRecord<K, V> output) {
    byte[] key = keySerializer.serialize(output.topic(), output.headers(), output.key());
    byte[] value = valueSerializer.serialize(output.topic(), output.headers(), output.value());
    return new ProducerRecord<>(
        output.topic(), output.partition(), output.timestamp(), key, value, output.headers());
  }

  /** Closes both serializers, as the producer would have. */
  @Override
  public void close() {
    try {
      keySerializer.close();
    } finally {
      valueSerializer.close();
    }
  }
}
