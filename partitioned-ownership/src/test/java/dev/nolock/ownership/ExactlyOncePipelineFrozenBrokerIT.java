package dev.nolock.ownership;

import static dev.nolock.ownership.ExactlyOncePipelineIT.count;
import static dev.nolock.ownership.ExactlyOncePipelineIT.inputIds;
import static dev.nolock.ownership.ExactlyOncePipelineIT.pipeline;
import static dev.nolock.ownership.ExactlyOncePipelineIT.produceInputs;
import static dev.nolock.ownership.ExactlyOncePipelineIT.read;
import static dev.nolock.ownership.ExactlyOncePipelineIT.readExactly;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.PrivateKafkaBroker;
import dev.nolock.testkit.PrivateKafkaBrokerExtension;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerInterceptor;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A broker frozen with {@code SIGSTOP} while a transaction's commit is in flight: the broker has
 * the transaction's records and offsets, the commit's {@code EndTxn} gets no answer, and {@code
 * commitTransaction()} times out after {@code max.block.ms}. The broker is a private one ({@link
 * PrivateKafkaBrokerExtension}): the shared broker is never frozen.
 *
 * <p>The freeze lands inside the commit, not before it: the outputs are held back until the commit
 * flushes them ({@code linger.ms} and {@code batch.size} are large), and {@link FreezeOnFirstAck}
 * freezes the broker on the producer's network thread when the first output's acknowledgement
 * arrives, before that thread can send {@code EndTxn} (which waits for every batch of the
 * transaction to be acknowledged).
 */
@ExtendWith(PrivateKafkaBrokerExtension.class)
class ExactlyOncePipelineFrozenBrokerIT {

  private static final int MAX_BLOCK_MS = 1_500;

  @AfterEach
  void thaw(PrivateKafkaBroker broker) {
    FreezeOnFirstAck.HOOK.set(null);
    if (broker.frozen()) {
      broker.thaw();
    }
  }

  @Test
  void aCommitThatTimesOutOnAFrozenBrokerIsRetriedAndItsBatchCommitsOnceWithoutAnAbort(
      PrivateKafkaBroker broker) throws Exception {
    KafkaBroker kafka = broker.broker();
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-out"), 1);
    produceInputs(kafka, input, 0, 20);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    AtomicInteger freezes = new AtomicInteger();
    FreezeOnFirstAck.HOOK.set(
        () -> {
          broker.freeze();
          freezes.incrementAndGet();
        });
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        pipeline(
            ExactlyOnceConfig.custom(broker.bootstrapServers(), input, "g-" + input, "tx-" + input)
                .sessionTimeout(TestOwners.SESSION_TIMEOUT)
                .maxPollInterval(Duration.ofSeconds(30))
                .pollTimeout(Duration.ofMillis(200))
                // Far longer than the freeze: the broker must not abort the transaction itself.
                .transactionTimeout(Duration.ofSeconds(60))
                .closeTimeout(Duration.ofSeconds(10))
                .metrics(metrics, "test")
                .producerProperty(ProducerConfig.MAX_BLOCK_MS_CONFIG, MAX_BLOCK_MS)
                .producerProperty(ProducerConfig.LINGER_MS_CONFIG, 60_000)
                .producerProperty(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20)
                .producerProperty(
                    ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, FreezeOnFirstAck.class.getName())
                .build(),
            record ->
                List.of(new ProducerRecord<>(output, record.key(), "once " + record.value())))) {
      pipeline.start();
      try {
        Awaitility.await("a commit timed out on the frozen broker, or the pipeline stopped")
            .atMost(Duration.ofSeconds(30))
            .until(
                () ->
                    count(metrics, "nolock.ownership.commit.timeouts") >= 1
                        || !pipeline.isRunning());
      } finally {
        thaw(broker); // also before the pipeline closes, however the wait ended
      }

      assertThat(freezes).as("the broker was frozen once, inside a commit").hasValue(1);
      assertThat(pipeline.failure().toJavaOptional())
          .as(
              "a commit that timed out is retried; the pipeline does not abort (which Kafka"
                  + " refuses with IllegalStateException) and stop")
          .isEmpty();
      assertThat(count(metrics, "nolock.ownership.commit.timeouts"))
          .as("a commit timed out (the fault fired)")
          .isGreaterThanOrEqualTo(1);

      List<String> committed = readExactly(kafka, output, "read_committed", 20);
      assertThat(inputIds(committed)).hasSize(20).doesNotHaveDuplicates();
      assertThat(read(kafka, output, "read_uncommitted", Integer.MAX_VALUE))
          .as("each output is in the log once: the batch was not aborted and sent again")
          .hasSize(20);
      assertThat(
              metrics
                  .get("nolock.ownership.transactions")
                  .tag("outcome", "aborted")
                  .counter()
                  .count())
          .isZero();
      assertThat(pipeline.isRunning()).isTrue();
      assertThat(pipeline.failure().toJavaOptional()).isEmpty();
    }
  }

  /**
   * An {@code abortTransaction()} that times out must be called again too, not taken for a broken
   * producer. The transform freezes the broker part way through the batch, before its offsets are
   * sent: the transaction fails before its commit (the next send or {@code
   * sendOffsetsToTransaction} times out, an abortable failure), and the abort that follows times
   * out until the broker is thawed. The batch is then transformed again and commits once.
   */
  @Test
  void anAbortThatTimesOutOnAFrozenBrokerIsRetriedAndTheBatchCommitsOnceAfterIt(
      PrivateKafkaBroker broker) throws Exception {
    KafkaBroker kafka = broker.broker();
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-out"), 1);
    produceInputs(kafka, input, 0, 5);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    AtomicInteger transformed = new AtomicInteger();
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        pipeline(
            ExactlyOnceConfig.custom(broker.bootstrapServers(), input, "g-" + input, "tx-" + input)
                .sessionTimeout(TestOwners.SESSION_TIMEOUT)
                .maxPollInterval(Duration.ofSeconds(30))
                .pollTimeout(Duration.ofMillis(200))
                .transactionTimeout(Duration.ofSeconds(60))
                .closeTimeout(Duration.ofSeconds(10))
                .metrics(metrics, "test")
                .producerProperty(ProducerConfig.MAX_BLOCK_MS_CONFIG, MAX_BLOCK_MS)
                .producerProperty(ProducerConfig.LINGER_MS_CONFIG, 60_000)
                .build(),
            record -> {
              if (transformed.incrementAndGet() == 5) {
                broker.freeze();
              }
              return List.of(new ProducerRecord<>(output, record.key(), "once " + record.value()));
            })) {
      pipeline.start();
      try {
        Awaitility.await("an abort timed out on the frozen broker, or the pipeline stopped")
            .atMost(Duration.ofSeconds(30))
            .until(
                () ->
                    count(metrics, "nolock.ownership.commit.timeouts") >= 1
                        || !pipeline.isRunning());
      } finally {
        thaw(broker);
      }

      assertThat(pipeline.failure().toJavaOptional())
          .as(
              "an abort that timed out is called again; the pipeline does not take it for a"
                  + " broken producer and stop")
          .isEmpty();
      assertThat(count(metrics, "nolock.ownership.commit.timeouts"))
          .as("the abort timed out (the fault fired)")
          .isGreaterThanOrEqualTo(1);
      List<String> committed = readExactly(kafka, output, "read_committed", 5);
      assertThat(inputIds(committed)).hasSize(5).doesNotHaveDuplicates();
      assertThat(
              metrics
                  .get("nolock.ownership.transactions")
                  .tag("outcome", "aborted")
                  .counter()
                  .count())
          .as("the batch's transaction was aborted once, then transformed again")
          .isEqualTo(1);
      assertThat(transformed).as("the batch was transformed twice").hasValueGreaterThan(5);
      assertThat(pipeline.isRunning()).isTrue();
    }
  }

  /**
   * The control: the same freeze makes a plain transactional producer's commit time out, and an
   * abort then (what the pipeline did before it retried the commit) is refused with {@link
   * IllegalStateException}. The freeze really lands in the commit, and the scenario above catches a
   * pipeline that aborts after a commit timeout.
   */
  @Test
  void theFreezeTimesOutTheCommitAndAnAbortAfterItIsRefused(PrivateKafkaBroker broker)
      throws Exception {
    KafkaBroker kafka = broker.broker();
    String output = kafka.createTopic(kafka.uniqueTopicName("control-out"), 1);
    Properties props = new Properties();
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, MAX_BLOCK_MS);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 60_000);
    props.put(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20);
    props.put(ProducerConfig.INTERCEPTOR_CLASSES_CONFIG, FreezeOnFirstAck.class.getName());
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, broker.bootstrapServers());
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "control-" + output);
    props.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, 60_000);
    FreezeOnFirstAck.HOOK.set(broker::freeze);
    KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
    try {
      producer.initTransactions();
      producer.beginTransaction();
      producer.send(new ProducerRecord<>(output, "k", "v"));

      assertThatThrownBy(producer::commitTransaction).isInstanceOf(TimeoutException.class);
      assertThat(broker.frozen()).as("the freeze landed between the send and the commit").isTrue();
      assertThatThrownBy(producer::abortTransaction)
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("commitTransaction` timed out and must be retried");

      broker.thaw();
      producer.commitTransaction();
    } finally {
      // A producer closes only once the broker answers: thaw first, however the test ends.
      thaw(broker);
      producer.close(Duration.ofSeconds(10));
    }
    assertThat(read(kafka, output, "read_committed", 1)).containsExactly("v");
  }

  /**
   * Runs {@link #HOOK} once, on the producer's network thread, when the first record is
   * acknowledged: the network thread sends nothing else (the commit's {@code EndTxn} included)
   * until the hook returns.
   */
  public static final class FreezeOnFirstAck implements ProducerInterceptor<String, String> {

    static final AtomicReference<Runnable> HOOK = new AtomicReference<>();

    @Override
    public ProducerRecord<String, String> onSend(ProducerRecord<String, String> record) {
      return record;
    }

    @Override
    public void onAcknowledgement(RecordMetadata metadata, Exception exception) {
      Runnable hook = exception == null ? HOOK.getAndSet(null) : null;
      if (hook != null) {
        hook.run();
      }
    }

    @Override
    public void close() {}

    @Override
    public void configure(Map<String, ?> configs) {}
  }
}
