package dev.nolock.ownership;

import dev.nolock.ownership.internal.OutputSerializer;
import dev.nolock.ownership.internal.PipelineLoop;
import dev.nolock.ownership.internal.PipelineMetrics;
import dev.nolock.ownership.internal.RecordDecoder;
import dev.nolock.ownership.internal.StopReason;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Exactly once from a topic to other topics: consume, transform, produce, with the outputs and the
 * input offsets in one Kafka transaction.
 *
 * <p>Guarantees, for consumers of the outputs that read with {@code
 * isolation.level=read_committed}: every input record's outputs appear exactly once, in input order
 * per input partition, across rebalances, crashes and pauses. Two fences make it so: the group
 * metadata passed to {@code sendOffsetsToTransaction} refuses the offsets of a member that has lost
 * its partitions (so its transaction cannot commit), and a producer started with the same {@code
 * transactional.id} fences the older one ({@link #start()} returns only after that). A fenced
 * producer is closed and the pipeline stops ({@link #fenced()}).
 *
 * <p>An input record that fails for good (a deserializer, the transform or a serializer of one of
 * its outputs throws) aborts the transaction and stops the pipeline, unless {@link
 * ExactlyOnceConfig.Builder#deadLetterTopic} is set: then its bytes go there in the same
 * transaction as the input offsets, exactly once. Only an input known to be poison is
 * dead-lettered: one {@link ExactlyOnceConfig.Builder#deadLetterWhen} marks. With the topic, a
 * transient failure (an unreachable schema registry) is retried after a backoff; a schema error, an
 * interrupt, an {@link Error}, a failure of unknown cause and any transform or serializer exception
 * not marked stop the pipeline; so does a failure after {@link
 * ExactlyOnceConfig#maxConsecutiveDeadLetters()} dead letters in a row.
 *
 * <p>A transaction that fails otherwise is aborted and its inputs transformed again. A commit that
 * times out is not: the broker may be completing it, so the pipeline calls {@code
 * commitTransaction()} again until it completes or fails, as Kafka requires. If it has not after
 * {@link ExactlyOnceConfig#commitRetryTimeout()}, the pipeline stops with a {@link
 * dev.nolock.patterns.BackendUnavailableException} in {@link #failure()}: that transaction's
 * outcome is unknown, and a new pipeline with the same {@code transactional.id} resolves it at
 * {@link #start()}.
 *
 * <p>Only the outputs on Kafka are exactly once. A transform that writes elsewhere (a database, an
 * HTTP call) repeats that write after every abort; use {@link PartitionOwner} for state in
 * PostgreSQL.
 */
public final class ExactlyOncePipeline<KI, VI, KO, VO> implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(ExactlyOncePipeline.class);

  private final ExactlyOnceConfig config;
  private final PipelineLoop<KI, VI, KO, VO> loop;
  private final Object lifecycle = new Object();
  private Thread thread;
  private boolean closed;
  private volatile Throwable failure;

  private ExactlyOncePipeline(
      ExactlyOnceConfig config,
      Deserializer<KI> keyDeserializer,
      Deserializer<VI> valueDeserializer,
      Serializer<KO> keySerializer,
      Serializer<VO> valueSerializer,
      Transform<KI, VI, KO, VO> transform) {
    this.config = Objects.requireNonNull(config, "config");
    Objects.requireNonNull(transform, "transform");
    MeterRegistry registry = config.meterRegistry().getOrElse(CompositeMeterRegistry::new);
    Objects.requireNonNull(keyDeserializer, "keyDeserializer");
    Objects.requireNonNull(valueDeserializer, "valueDeserializer");
    Objects.requireNonNull(keySerializer, "keySerializer");
    Objects.requireNonNull(valueSerializer, "valueSerializer");
    // Bytes: the loop runs the (de)serializers, so that a record that fails keeps its bytes for
    // the dead-letter topic, which the same transaction writes.
    KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            consumerProperties(config), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    KafkaProducer<byte[], byte[]> producer;
    try {
      producer =
          new KafkaProducer<>(
              producerProperties(config), new ByteArraySerializer(), new ByteArraySerializer());
    } catch (RuntimeException e) {
      consumer.close(CloseOptions.timeout(Duration.ZERO));
      throw e;
    }
    this.loop =
        new PipelineLoop<>(
            config,
            consumer,
            new RecordDecoder<>(keyDeserializer, valueDeserializer),
            producer,
            new OutputSerializer<>(keySerializer, valueSerializer),
            transform,
            new PipelineMetrics(
                registry,
                config.metricsInstanceName().getOrElse(config.groupId()),
                config.inputTopic()));
  }

  /** A pipeline, not started yet. */
  public static <KI, VI, KO, VO> ExactlyOncePipeline<KI, VI, KO, VO> create(
      ExactlyOnceConfig config,
      Deserializer<KI> keyDeserializer,
      Deserializer<VI> valueDeserializer,
      Serializer<KO> keySerializer,
      Serializer<VO> valueSerializer,
      Transform<KI, VI, KO, VO> transform) {
    return new ExactlyOncePipeline<>(
        config, keyDeserializer, valueDeserializer, keySerializer, valueSerializer, transform);
  }

  private static Map<String, Object> consumerProperties(ExactlyOnceConfig config) {
    Map<String, Object> props = new HashMap<>();
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(
        ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
        CooperativeStickyAssignor.class.getName());
    props.putAll(config.consumerProperties());
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, config.groupId());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, config.maxPollRecords());
    props.put(
        ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, (int) config.maxPollInterval().toMillis());
    String protocol =
        String.valueOf(config.consumerProperties().get(ConsumerConfig.GROUP_PROTOCOL_CONFIG));
    if ("consumer".equalsIgnoreCase(protocol)) {
      props.remove(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG);
    } else {
      props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, (int) config.sessionTimeout().toMillis());
      props.put(
          ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
          (int) Math.max(1, config.sessionTimeout().toMillis() / 3));
    }
    return props;
  }

  private static Map<String, Object> producerProperties(ExactlyOnceConfig config) {
    Map<String, Object> props = new HashMap<>(config.producerProperties());
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, config.transactionalId());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(
        ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, (int) config.transactionTimeout().toMillis());
    return props;
  }

  /**
   * Registers the {@code transactional.id} (fencing every older producer with it and aborting its
   * open transaction), then starts the loop on a thread of its own.
   *
   * @throws org.apache.kafka.common.errors.ProducerFencedException when a newer producer with the
   *     same id exists already
   * @throws IllegalStateException when called twice or after {@link #close()}
   */
  public ExactlyOncePipeline<KI, VI, KO, VO> start() {
    synchronized (lifecycle) {
      if (closed) {
        throw new IllegalStateException("This pipeline is closed; create a new one.");
      }
      if (thread != null) {
        throw new IllegalStateException("This pipeline was started already.");
      }
      loop.initTransactions();
      thread =
          new Thread(
              this::runLoop, "nolock-eos-" + config.groupId() + "-" + config.transactionalId());
      thread.start();
      return this;
    }
  }

  private void runLoop() {
    try {
      loop.run();
    } catch (Throwable e) {
      failure = e;
      if (loop.fenced()) {
        log.warn("Pipeline {} stopped: fenced", config.transactionalId());
      } else {
        // Without the exception: its causes' messages (the transform's) quote the record.
        log.error(
            "Pipeline {} stopped (failure() has the exception): {}",
            config.transactionalId(),
            StopReason.describe(e));
      }
    }
  }

  /** True once a newer producer with the same {@code transactional.id} fenced this one. */
  public boolean fenced() {
    return loop.fenced();
  }

  /** True from {@link #start()} until the loop has stopped. */
  public boolean isRunning() {
    Thread t;
    synchronized (lifecycle) {
      t = thread;
    }
    return t != null && t.isAlive();
  }

  /**
   * Why the loop stopped on its own: the fence, the transform's or a deserializer's failure
   * (without a dead-letter topic), a fatal Kafka error, or a commit still unanswered after {@link
   * ExactlyOnceConfig#commitRetryTimeout()} ({@link
   * dev.nolock.patterns.BackendUnavailableException}: outcome unknown). The pipeline's ERROR line
   * names it without the messages of its causes (the transform's exception names only its class),
   * which quote the records; this is the whole exception.
   */
  public Option<Throwable> failure() {
    return Option.of(failure);
  }

  /** Waits until the loop has stopped; true if it has. */
  public boolean awaitTermination(Duration timeout) throws InterruptedException {
    Thread t;
    synchronized (lifecycle) {
      t = thread;
    }
    if (t == null) {
      return true;
    }
    t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(timeout.toNanos())));
    return !t.isAlive();
  }

  public ExactlyOnceConfig config() {
    return config;
  }

  /**
   * Stops the loop after the transaction in flight (committed or aborted), closes the producer and
   * the consumer (leaving the group). Idempotent.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (lifecycle) {
      closed = true;
      t = thread;
    }
    loop.requestClose();
    if (t == null) {
      loop.closeUnstarted();
      return;
    }
    try {
      t.join(config.closeTimeout().toMillis() + 5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  @Override
  public String toString() {
    return "ExactlyOncePipeline[" + config + "]";
  }
}
