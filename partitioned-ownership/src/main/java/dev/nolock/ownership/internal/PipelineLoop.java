package dev.nolock.ownership.internal;

import dev.nolock.ownership.ExactlyOnceConfig;
import dev.nolock.ownership.Transform;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consume-transform-produce loop: per poll, one transaction with the outputs of every record
 * and the batch's next offsets ({@code sendOffsetsToTransaction} with the consumer's group
 * metadata, so a consumer that has lost its partitions cannot commit them).
 *
 * <p>Failures: a fence ({@link ProducerFencedException}) closes the producer and stops the loop for
 * good. On Kafka 4.x a fenced producer first sees {@code InvalidProducerEpochException}: the loop
 * aborts, and the abort throws {@link ProducerFencedException} if it was a fence. Anything else
 * that an abort can cure (a rebalance, a timeout) aborts, rewinds the batch and goes on.
 */
public final class PipelineLoop<KI, VI, KO, VO> {

  private static final Logger log = LoggerFactory.getLogger(PipelineLoop.class);

  private final ExactlyOnceConfig config;
  private final Consumer<KI, VI> consumer;
  private final Producer<KO, VO> producer;
  private final Transform<KI, VI, KO, VO> transform;
  private final PipelineMetrics metrics;
  private final AtomicBoolean closing = new AtomicBoolean();
  private volatile boolean fenced;
  private boolean producerClosed;

  public PipelineLoop(
      ExactlyOnceConfig config,
      Consumer<KI, VI> consumer,
      Producer<KO, VO> producer,
      Transform<KI, VI, KO, VO> transform,
      PipelineMetrics metrics) {
    this.config = config;
    this.consumer = consumer;
    this.producer = producer;
    this.transform = transform;
    this.metrics = metrics;
  }

  /**
   * Registers the transactional id: fences every older producer with it and aborts its open
   * transaction. Called before the loop starts, from the starting thread.
   */
  public void initTransactions() {
    try {
      producer.initTransactions();
    } catch (KafkaException e) {
      if (KafkaErrors.isFenced(e)) {
        fenced = true;
        metrics.fenced();
      }
      closeAll();
      throw e;
    }
  }

  /** True once this pipeline's producer was fenced by a newer one. */
  public boolean fenced() {
    return fenced;
  }

  /** Closes the clients of a loop that never ran. */
  public void closeUnstarted() {
    closeAll();
  }

  public void requestClose() {
    closing.set(true);
    consumer.wakeup();
  }

  /** Runs until {@link #requestClose()} or a fence or fatal error, which is thrown. */
  public void run() {
    try {
      consumer.subscribe(List.of(config.inputTopic()));
      while (!closing.get()) {
        ConsumerRecords<KI, VI> records = consumer.poll(config.pollTimeout());
        if (!records.isEmpty()) {
          transact(records);
        }
      }
    } catch (WakeupException | InterruptException e) {
      if (!closing.get()) {
        throw e;
      }
    } finally {
      closeAll();
    }
  }

  private void transact(ConsumerRecords<KI, VI> records) {
    producer.beginTransaction();
    try {
      for (ConsumerRecord<KI, VI> record : records) {
        List<ProducerRecord<KO, VO>> outputs;
        try {
          outputs = transform.apply(record);
        } catch (Exception e) {
          abortQuietly();
          throw new IllegalStateException(
              "The transform failed on "
                  + record.topic()
                  + "-"
                  + record.partition()
                  + "@"
                  + record.offset()
                  + "; the transaction was aborted and the pipeline stopped.",
              e);
        }
        for (ProducerRecord<KO, VO> output : outputs) {
          producer.send(output);
        }
      }
      producer.sendOffsetsToTransaction(nextOffsets(records), consumer.groupMetadata());
      producer.commitTransaction();
      metrics.committed(records.count());
    } catch (KafkaException e) {
      recover(e, records);
    }
  }

  private void recover(KafkaException failure, ConsumerRecords<KI, VI> records) {
    log.info(
        "Transaction of {} failed ({}); aborting it", config.transactionalId(), failure.toString());
    if (KafkaErrors.isFenced(failure)) {
      throw fencedBy(failure);
    }
    if (KafkaErrors.isFatal(failure)) {
      throw failure;
    }
    // Abortable, or possibly fenced (InvalidProducerEpochException on Kafka 4.x): the abort
    // tells which.
    try {
      producer.abortTransaction();
    } catch (ProducerFencedException e) {
      e.addSuppressed(failure);
      throw fencedBy(e);
    } catch (KafkaException e) {
      if (KafkaErrors.isFenced(e)) {
        e.addSuppressed(failure);
        throw fencedBy(e);
      }
      e.addSuppressed(failure);
      throw e; // the producer is in a fatal state
    }
    metrics.aborted();
    log.warn(
        "Transaction of {} aborted, batch rewound: {}",
        config.transactionalId(),
        failure.toString());
    rewind(records);
  }

  private RuntimeException fencedBy(KafkaException e) {
    fenced = true;
    metrics.fenced();
    log.warn(
        "Producer {} was fenced by a newer producer with the same transactional.id; closing it"
            + " and stopping: {}",
        config.transactionalId(),
        e.toString());
    closeProducer();
    return e;
  }

  private void abortQuietly() {
    try {
      producer.abortTransaction();
      metrics.aborted();
    } catch (KafkaException e) {
      log.debug("Abort after a transform failure failed: {}", e.toString());
    }
  }

  /** Back to each partition's first record of this batch: where the aborted transaction began. */
  private void rewind(ConsumerRecords<KI, VI> records) {
    for (TopicPartition tp : records.partitions()) {
      if (consumer.assignment().contains(tp)) {
        consumer.seek(tp, records.records(tp).get(0).offset());
      }
    }
  }

  private static <K, V> Map<TopicPartition, OffsetAndMetadata> nextOffsets(
      ConsumerRecords<K, V> records) {
    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    for (TopicPartition tp : records.partitions()) {
      List<ConsumerRecord<K, V>> list = records.records(tp);
      offsets.put(tp, new OffsetAndMetadata(list.get(list.size() - 1).offset() + 1));
    }
    return offsets;
  }

  private void closeProducer() {
    if (!producerClosed) {
      producerClosed = true;
      try {
        producer.close(Duration.ZERO);
      } catch (RuntimeException e) {
        log.debug("Closing the producer failed: {}", e.toString());
      }
    }
  }

  private void closeAll() {
    closeProducer();
    try {
      consumer.close(CloseOptions.timeout(config.closeTimeout()));
    } catch (RuntimeException e) {
      log.warn("Closing the consumer failed: {}", e.toString());
    }
  }
}
