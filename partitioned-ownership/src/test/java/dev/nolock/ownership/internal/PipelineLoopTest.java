package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.ownership.ExactlyOnceConfig;
import dev.nolock.ownership.Transform;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.CapturedStderr;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The pipeline's loop after a {@code commitTransaction()} or {@code abortTransaction()} that timed
 * out, against a producer that keeps Kafka's rule (kafka-clients 4.x, {@code
 * TransactionManager.handleCachedTransactionRequestResult}): after such a timeout, only the same
 * call is accepted until one completes; any other throws {@link IllegalStateException}. The real
 * broker's commit timeout is in {@code ExactlyOncePipelineIT}; what it cannot show in seconds (a
 * commit that never completes, an abort that times out) is here.
 */
class PipelineLoopTest {

  private static final String TOPIC = "in";
  private static final TopicPartition TP = new TopicPartition(TOPIC, 0);

  /** A mock producer whose commits and aborts time out as told, and that keeps Kafka's rule. */
  private static final class TimingOutProducer extends MockProducer<byte[], byte[]> {
    int commitTimeoutsLeft;
    int abortTimeoutsLeft;
    int commitFailuresLeft;
    KafkaException commitFailure = new KafkaException("an abortable error");
    final List<String> calls = new ArrayList<>();
    private String mustBeRetried;

    TimingOutProducer() {
      super(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    }

    @Override
    public void beginTransaction() {
      keepKafkasRule("beginTransaction");
      super.beginTransaction();
    }

    @Override
    public void commitTransaction() {
      enter("commitTransaction");
      if (commitTimeoutsLeft > 0) {
        commitTimeoutsLeft--;
        timeOut("commitTransaction");
      }
      mustBeRetried = null;
      if (commitFailuresLeft > 0) {
        commitFailuresLeft--;
        throw commitFailure;
      }
      super.commitTransaction();
    }

    @Override
    public void abortTransaction() {
      enter("abortTransaction");
      if (abortTimeoutsLeft > 0) {
        abortTimeoutsLeft--;
        timeOut("abortTransaction");
      }
      mustBeRetried = null;
      super.abortTransaction();
    }

    private void enter(String operation) {
      calls.add(operation);
      keepKafkasRule(operation);
    }

    private void keepKafkasRule(String operation) {
      if (mustBeRetried != null && !mustBeRetried.equals(operation)) {
        throw new IllegalStateException(
            "Cannot attempt operation `"
                + operation
                + "` because the previous call to `"
                + mustBeRetried
                + "` timed out and must be retried");
      }
    }

    private void timeOut(String operation) {
      mustBeRetried = operation;
      throw new TimeoutException(operation + " timed out");
    }
  }

  private static ExactlyOnceConfig config() {
    return ExactlyOnceConfig.custom("127.0.0.1:9", TOPIC, "group", "tx")
        .commitRetryTimeout(Duration.ofSeconds(1))
        .build();
  }

  private static ExactlyOnceConfig withDeadLetterTopic() {
    return ExactlyOnceConfig.custom("127.0.0.1:9", TOPIC, "group", "tx")
        .commitRetryTimeout(Duration.ofSeconds(1))
        .deadLetterTopic("dlt")
        .deadLetterWhen(e -> true) // transient failures are retried whatever it says
        .build();
  }

  private static UncheckedIOException refused() {
    return new UncheckedIOException(new ConnectException("connection refused"));
  }

  private static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static RecordDecoder<String, String> strings() {
    return new RecordDecoder<>(new StringDeserializer(), new StringDeserializer());
  }

  private static PipelineLoop<String, String, String, String> loop(
      ExactlyOnceConfig config,
      MockConsumer<byte[], byte[]> consumer,
      Producer<byte[], byte[]> producer,
      Transform<String, String, String, String> transform,
      SimpleMeterRegistry registry) {
    return new PipelineLoop<>(
        config,
        consumer,
        strings(),
        producer,
        new OutputSerializer<>(new StringSerializer(), new StringSerializer()),
        transform,
        new PipelineMetrics(registry, "group", TOPIC));
  }

  /** A consumer that is assigned the partition and returns one record at the first poll. */
  private static MockConsumer<byte[], byte[]> consumerWithOneRecord() {
    MockConsumer<byte[], byte[]> consumer = new MockConsumer<>("earliest");
    consumer.schedulePollTask(
        () -> {
          consumer.rebalance(List.of(TP));
          consumer.updateBeginningOffsets(Map.of(TP, 0L));
          consumer.addRecord(new ConsumerRecord<>(TOPIC, 0, 0, bytes("k"), bytes("v")));
        });
    return consumer;
  }

  @Test
  void aCommitThatNeverCompletesStopsThePipelineWithOutcomeUnknownAndIsNeverAborted() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    producer.commitTimeoutsLeft = Integer.MAX_VALUE;
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PipelineLoop<String, String, String, String> loop =
        loop(config(), consumer, producer, record -> List.of(), registry);
    loop.initTransactions();

    assertThatThrownBy(loop::run)
        .as("a commit that never completes ends as outcome unknown, never in an abort")
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("outcome is unknown")
        .hasMessageContaining("same transactional.id")
        .hasCauseInstanceOf(TimeoutException.class);
    assertThat(producer.calls)
        .as("the commit was called again after it timed out, and nothing else was")
        .hasSizeGreaterThan(1)
        .containsOnly("commitTransaction");
    assertThat(registry.get("nolock.ownership.commit.timeouts").counter().count())
        .isEqualTo(producer.calls.size());
    assertThat(producer.closed()).as("the producer is closed").isTrue();
  }

  @Test
  void anAbortThatTimesOutIsCalledAgainAndThePipelineGoesOn() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    producer.commitFailuresLeft = 1;
    producer.abortTimeoutsLeft = 2;
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    PipelineLoop<String, String, String, String> loop =
        loop(config(), consumer, producer, record -> List.of(), registry);
    loop.initTransactions();
    consumer.schedulePollTask(loop::requestClose); // the poll after the aborted transaction

    assertThatCode(loop::run)
        .as("an abort that timed out is called again, not reported as a broken producer")
        .doesNotThrowAnyException();

    assertThat(producer.calls)
        .as("the abort that timed out was called again until it completed")
        .startsWith(
            "commitTransaction", "abortTransaction", "abortTransaction", "abortTransaction");
    assertThat(producer.transactionAborted()).isTrue();
    assertThat(
            registry
                .get("nolock.ownership.transactions")
                .tag("outcome", "aborted")
                .counter()
                .count())
        .isEqualTo(1);
  }

  @Test
  void aTransactionThatKeepsFailingIsTriedAgainAfterABackoffNotInAHotLoop() {
    // E.g. a dead letter the broker refuses as too large once the nolock.dlt.* headers are added:
    // each attempt fails the same way, with an abortable error.
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    producer.commitFailuresLeft = 2;
    PipelineLoop<String, String, String, String> loop =
        loop(config(), consumer, producer, record -> List.of(), new SimpleMeterRegistry());
    List<Duration> waits = new ArrayList<>();
    loop.pauseWith(
        delay -> {
          waits.add(delay);
          return false;
        });
    loop.initTransactions();
    for (int again = 0; again < 2; again++) {
      consumer.schedulePollTask(
          () -> consumer.addRecord(new ConsumerRecord<>(TOPIC, 0, 0, bytes("k"), bytes("v"))));
    }
    consumer.schedulePollTask(loop::requestClose);

    assertThatCode(loop::run).doesNotThrowAnyException();

    assertThat(producer.calls)
        .containsExactly(
            "commitTransaction",
            "abortTransaction",
            "commitTransaction",
            "abortTransaction",
            "commitTransaction");
    assertThat(waits)
        .as("each failed transaction waits a backoff before the batch is tried again")
        .hasSize(2)
        .allSatisfy(delay -> assertThat(delay).isPositive());
  }

  @Test
  @Timeout(value = 30, threadMode = Timeout.ThreadMode.SEPARATE_THREAD) // without the fix: forever
  void aTransactionTheBrokerRefusesForWhatWasSentStopsAfterItsAbortInsteadOfRetryingForever() {
    // A dead letter too large once the nolock.dlt.* headers are added fails every attempt alike.
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    producer.commitFailuresLeft = Integer.MAX_VALUE;
    producer.commitFailure = new KafkaException(new RecordTooLargeException("too large"));
    PipelineLoop<String, String, String, String> loop =
        loop(config(), consumer, producer, record -> List.of(), new SimpleMeterRegistry());
    loop.pauseWith(delay -> false);
    loop.initTransactions();

    assertThatThrownBy(loop::run).hasRootCauseInstanceOf(RecordTooLargeException.class);
    assertThat(producer.calls).containsExactly("commitTransaction", "abortTransaction");
  }

  @Test
  void aPredicateThatThrowsAbortsTheTransactionAndStopsThePipeline() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    PipelineLoop<String, String, String, String> loop =
        loop(
            ExactlyOnceConfig.custom("127.0.0.1:9", TOPIC, "group", "tx")
                .deadLetterTopic("dlt")
                .deadLetterWhen(
                    e -> {
                      throw new IllegalStateException("a predicate with a bug");
                    })
                .build(),
            consumer,
            producer,
            record -> {
              throw new IllegalArgumentException("cannot transform");
            },
            new SimpleMeterRegistry());
    loop.initTransactions();

    assertThatThrownBy(loop::run)
        .isInstanceOf(RecordFailures.PredicateFailedException.class)
        .hasMessageContaining("in-0@0")
        .hasCauseInstanceOf(IllegalArgumentException.class);
    assertThat(producer.transactionAborted())
        .as("nothing of the batch stays open until the transaction times out")
        .isTrue();
  }

  @Test
  void anErrorFromTheTransformAbortsTheTransactionBeforeThePipelineStops() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    PipelineLoop<String, String, String, String> loop =
        loop(
            config(),
            consumer,
            producer,
            record -> {
              throw new StackOverflowError();
            },
            new SimpleMeterRegistry());
    loop.initTransactions();

    assertThatThrownBy(loop::run).isInstanceOf(StackOverflowError.class);
    assertThat(producer.transactionAborted())
        .as("nothing of the batch stays open until the transaction times out")
        .isTrue();
  }

  @Test
  void aSerializerFailureStopsTheLoopWithoutItsMessage() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    Serializer<String> cardReader =
        (topic, value) -> {
          // A serializer's message quotes what it could not write, as a JSON mapper's does.
          throw new SerializationException("cannot write card 4111-1111-1111-1111 in " + value);
        };
    MockProducer<byte[], byte[]> producer =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    PipelineLoop<String, String, String, String> loop =
        new PipelineLoop<>(
            config(),
            consumer,
            strings(),
            producer,
            new OutputSerializer<>(new StringSerializer(), cardReader),
            record -> List.of(new ProducerRecord<>("out", record.key(), record.value())),
            new PipelineMetrics(new SimpleMeterRegistry(), "group", TOPIC));
    loop.initTransactions();

    String logged;
    try (CapturedStderr log = new CapturedStderr()) {
      assertThatThrownBy(loop::run)
          .as("the input record's failure stops the loop: no abort and transform again at once")
          .isInstanceOfSatisfying(
              RecordFailedException.class,
              e -> {
                assertThat(e.stage()).isEqualTo(RecordFailedException.Stage.SERIALIZER);
                assertThat(e.getMessage()).contains("in-0@0").doesNotContain("4111");
                assertThat(e).hasCauseInstanceOf(SerializationException.class);
              });
      logged = log.text();
    }

    assertThat(producer.transactionAborted()).as("the serializer failure aborted it").isTrue();
    assertThat(producer.history()).as("nothing of the record was sent").isEmpty();
    assertThat(logged).as("nothing logs the serializer's message").doesNotContain("4111");
  }

  @Test
  void aTransientFailureWhoseAbortTimesOutCallsTheAbortAgainThenRetriesTheBatch() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    producer.abortTimeoutsLeft = 1;
    AtomicInteger calls = new AtomicInteger();
    PipelineLoop<String, String, String, String> loop =
        loop(
            withDeadLetterTopic(),
            consumer,
            producer,
            record -> {
              if (calls.incrementAndGet() == 1) {
                throw refused();
              }
              return List.of();
            },
            new SimpleMeterRegistry());
    loop.initTransactions();
    consumer.schedulePollTask(
        () -> consumer.addRecord(new ConsumerRecord<>(TOPIC, 0, 0, bytes("k"), bytes("v"))));
    consumer.schedulePollTask(loop::requestClose);

    assertThatCode(loop::run)
        .as("the abort that timed out is called again before the next transaction begins")
        .doesNotThrowAnyException();
    assertThat(producer.calls)
        .containsExactly("abortTransaction", "abortTransaction", "commitTransaction");
    assertThat(calls).hasValue(2);
  }

  @Test
  void aFenceFoundByTheAbortAfterATransientFailureStopsThePipelineAsFenced() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    TimingOutProducer producer = new TimingOutProducer();
    PipelineLoop<String, String, String, String> loop =
        loop(
            withDeadLetterTopic(),
            consumer,
            producer,
            record -> {
              producer.fenceProducer(); // a newer pipeline took the transactional id meanwhile
              throw refused();
            },
            new SimpleMeterRegistry());
    loop.initTransactions();
    consumer.schedulePollTask(loop::requestClose);

    assertThatThrownBy(loop::run).isInstanceOf(ProducerFencedException.class);
    assertThat(loop.fenced()).as("fenced() tells the caller why it stopped").isTrue();
  }

  @Test
  void aStopThatADeadLetterTopicCannotHelpDoesNotSuggestOne() {
    MockConsumer<byte[], byte[]> consumer = consumerWithOneRecord();
    PipelineLoop<String, String, String, String> loop =
        loop(
            config(),
            consumer,
            new TimingOutProducer(),
            record -> {
              throw new IllegalStateException("a bug");
            },
            new SimpleMeterRegistry());
    loop.initTransactions();

    assertThatThrownBy(loop::run)
        .isInstanceOf(RecordFailedException.class)
        .hasMessageContaining("deadLetterWhen")
        .as("a dead-letter topic alone would not take it")
        .hasMessageNotContaining("to send such input records there");
  }
}
