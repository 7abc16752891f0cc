package dev.nolock.ownership;

import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerInterceptor;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer interceptor ({@code interceptor.classes}) that keeps, per {@code client.id}, the
 * offset range of each partition in the last batch {@code poll()} returned: what the runner has in
 * hand in the turn that follows. Kafka calls {@code onConsume} inside {@code poll}, on the runner's
 * loop thread, only for a batch that is not empty; {@link #take} forgets the batch, so a later turn
 * whose poll returned nothing does not see it again.
 */
public final class PolledRecords implements ConsumerInterceptor<Object, Object> {

  /** The first and last offset of one partition's records in a batch. */
  record Range(long first, long last) {}

  private static final Map<String, Map<Integer, Range>> LAST = new ConcurrentHashMap<>();

  private String clientId;

  @Override
  public void configure(Map<String, ?> configs) {
    clientId = String.valueOf(configs.get(ConsumerConfig.CLIENT_ID_CONFIG));
  }

  @Override
  public ConsumerRecords<Object, Object> onConsume(ConsumerRecords<Object, Object> records) {
    Map<Integer, Range> batch = new TreeMap<>();
    for (TopicPartition tp : records.partitions()) {
      List<ConsumerRecord<Object, Object>> list = records.records(tp);
      batch.put(
          tp.partition(), new Range(list.get(0).offset(), list.get(list.size() - 1).offset()));
    }
    LAST.put(clientId, batch);
    return records;
  }

  /** The last batch returned to {@code clientId} and not taken yet (empty if none). */
  static Map<Integer, Range> take(String clientId) {
    Map<Integer, Range> batch = LAST.remove(clientId);
    return batch == null ? Map.of() : batch;
  }

  /** The last batch returned to {@code clientId} (empty if none yet), without forgetting it. */
  static Map<Integer, Range> peek(String clientId) {
    return LAST.getOrDefault(clientId, Map.of());
  }

  @Override
  public void onCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {}

  @Override
  public void close() {}
}
