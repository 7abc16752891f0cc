package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Consume-transform-produce with a transactional producer, against the broker. */
@ExtendWith(KafkaExtension.class)
class ExactlyOncePipelineIT {

  @Test
  void aZombieProducerWithTheSameTransactionalIdIsFencedClosedAndItsOutputNeverCommits(
      KafkaBroker kafka) throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-in"), 2);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-out"), 2);
    String group = "pipeline-" + input;
    produceInputs(kafka, input, 0, 50);

    CountDownLatch zombieBlocked = new CountDownLatch(1);
    CountDownLatch releaseZombie = new CountDownLatch(1);
    AtomicInteger zombieTransformed = new AtomicInteger();
    SimpleMeterRegistry zombieMetrics = new SimpleMeterRegistry();
    SimpleMeterRegistry successorMetrics = new SimpleMeterRegistry();
    ExactlyOnceConfig zombieConfig =
        config(kafka, input, group, "shared-tx-" + input, zombieMetrics);
    ExactlyOnceConfig successorConfig =
        config(kafka, input, group, "shared-tx-" + input, successorMetrics);

    try (ExactlyOncePipeline<String, String, String, String> zombie =
            pipeline(
                zombieConfig,
                record -> {
                  // The second record of the first batch waits here: the first one's output has
                  // been sent inside the open transaction.
                  if (zombieTransformed.incrementAndGet() == 2) {
                    zombieBlocked.countDown();
                    releaseZombie.await(60, TimeUnit.SECONDS);
                  }
                  return List.of(out(output, record, "zombie"));
                });
        ExactlyOncePipeline<String, String, String, String> successor =
            pipeline(successorConfig, record -> List.of(out(output, record, "successor")))) {
      zombie.start();
      assertThat(zombieBlocked.await(60, TimeUnit.SECONDS)).isTrue();
      Awaitility.await("the zombie's first output is in the log, in its open transaction")
          .atMost(Duration.ofSeconds(30))
          .until(
              () ->
                  read(kafka, output, "read_uncommitted", 1).stream()
                      .anyMatch(v -> v.startsWith("zombie")));

      successor.start(); // initTransactions with the same transactional.id: fences the zombie
      releaseZombie.countDown();

      assertThat(zombie.awaitTermination(Duration.ofSeconds(60))).isTrue();
      assertThat(zombie.fenced()).isTrue();
      assertThat(zombie.failure().toJavaOptional())
          .get()
          .satisfies(
              e -> assertThat(causes(e)).hasAtLeastOneElementOfType(ProducerFencedException.class));
      assertThat(zombieMetrics.get("nolock.ownership.producer.fenced").counter().count())
          .isEqualTo(1);
      assertThat(
              zombieMetrics
                  .get("nolock.ownership.transactions")
                  .tag("outcome", "committed")
                  .counter()
                  .count())
          .isZero();

      List<String> committed = readExactly(kafka, output, "read_committed", 50);
      assertThat(committed).allMatch(v -> v.startsWith("successor"));
      assertThat(inputIds(committed)).hasSize(50).doesNotHaveDuplicates();
      assertThat(read(kafka, output, "read_uncommitted", 51))
          .as("the zombie's write was attempted: it is in the log, aborted")
          .anyMatch(v -> v.startsWith("zombie"));
      assertThat(successor.failure().toJavaOptional()).isEmpty();
    }
  }

  @Test
  void everyInputIsTransformedExactlyOnceAcrossARebalance(KafkaBroker kafka) throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-in"), 4);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-out"), 4);
    String group = "pipeline-" + input;
    produceInputs(kafka, input, 0, 300);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (ExactlyOncePipeline<String, String, String, String> first =
            pipeline(
                config(kafka, input, group, "first-" + input, metrics),
                record -> List.of(out(output, record, "first")));
        ExactlyOncePipeline<String, String, String, String> second =
            pipeline(
                config(kafka, input, group, "second-" + input, metrics),
                record -> List.of(out(output, record, "second")))) {
      first.start();
      Awaitility.await("some inputs transformed")
          .atMost(Duration.ofSeconds(60))
          .until(() -> transformed(metrics) > 0);
      second.start();
      produceInputs(kafka, input, 300, 300);
      List<String> committed = readExactly(kafka, output, "read_committed", 600);
      assertThat(inputIds(committed)).hasSize(600).doesNotHaveDuplicates();
      assertThat(first.failure().toJavaOptional()).isEmpty();
      assertThat(second.failure().toJavaOptional()).isEmpty();
    }
  }

  /**
   * A {@code commitTransaction()} that times out ({@code max.block.ms}) must be called again: the
   * commit may be completing on the broker, so Kafka refuses any other call until it has ({@code
   * abortTransaction()} throws {@link IllegalStateException}).
   *
   * <p>The timeout is real: a produce quota on the pipeline's producer ({@code client.id}), low
   * enough that the transaction's outputs exceed it, makes the broker answer the produce with a
   * throttle time of a few seconds, and the producer holds back its next request to the broker, the
   * commit's {@code EndTxn}, for that long: longer than {@code max.block.ms}. The outputs are sent
   * only when the commit flushes them ({@code linger.ms} and {@code batch.size} are large), so the
   * throttle lands on the commit, not on {@code sendOffsetsToTransaction}. The quota is removed
   * once a commit has timed out; the throttle already imposed runs out, and the retried commit
   * completes. The quota belongs to this test's {@code client.id} only and is removed however the
   * test ends.
   */
  @Test
  void aCommitThatTimesOutIsRetriedAndItsBatchCommitsOnceWithoutAnAbort(KafkaBroker kafka)
      throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-out"), 1);
    String group = "pipeline-" + input;
    String clientId = "throttled-" + input;
    produceInputs(kafka, input, 0, 20);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    // 20 outputs of 1 kB against 1.5 kB/s, measured over the broker's ~10 s quota window: a
    // throttle of a few seconds.
    produceQuota(kafka, clientId, 1_500.0);
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        pipeline(
            ExactlyOnceConfig.custom(kafka.bootstrapServers(), input, group, "slow-" + input)
                .sessionTimeout(TestOwners.SESSION_TIMEOUT)
                .maxPollInterval(Duration.ofSeconds(30))
                .pollTimeout(Duration.ofMillis(200))
                .transactionTimeout(Duration.ofSeconds(30))
                .closeTimeout(Duration.ofSeconds(10))
                .metrics(metrics, "test")
                .producerProperty(ProducerConfig.CLIENT_ID_CONFIG, clientId)
                .producerProperty(ProducerConfig.MAX_BLOCK_MS_CONFIG, 1_500)
                .producerProperty(ProducerConfig.LINGER_MS_CONFIG, 10_000)
                .producerProperty(ProducerConfig.BATCH_SIZE_CONFIG, 1 << 20)
                .build(),
            record ->
                List.of(
                    new ProducerRecord<>(
                        output,
                        record.key(),
                        "once " + record.value() + " " + "x".repeat(1_000))))) {
      pipeline.start();
      Awaitility.await("a commit timed out, or the pipeline stopped")
          .atMost(Duration.ofSeconds(60))
          .until(
              () ->
                  count(metrics, "nolock.ownership.commit.timeouts") >= 1 || !pipeline.isRunning());
      produceQuota(kafka, clientId, null);
      assertThat(pipeline.failure().toJavaOptional())
          .as(
              "a commit that timed out is retried; the pipeline does not abort (which Kafka"
                  + " refuses with IllegalStateException) and stop")
          .isEmpty();
      assertThat(count(metrics, "nolock.ownership.commit.timeouts"))
          .as("a commit timed out (the fault fired)")
          .isGreaterThanOrEqualTo(1);

      List<String> committed = readExactly(kafka, output, "read_committed", 20);
      assertThat(inputIds(committed).stream().map(v -> v.substring(0, v.indexOf(' '))).toList())
          .hasSize(20)
          .doesNotHaveDuplicates();
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
    } finally {
      produceQuota(kafka, clientId, null);
    }
  }

  /** Sets (or, with null, removes) the broker's produce quota for one client id. */
  private static void produceQuota(KafkaBroker kafka, String clientId, Double bytesPerSecond)
      throws Exception {
    kafka
        .admin()
        .alterClientQuotas(
            List.of(
                new ClientQuotaAlteration(
                    new ClientQuotaEntity(Map.of(ClientQuotaEntity.CLIENT_ID, clientId)),
                    List.of(new ClientQuotaAlteration.Op("producer_byte_rate", bytesPerSecond)))))
        .all()
        .get(30, TimeUnit.SECONDS);
  }

  static double count(SimpleMeterRegistry metrics, String name) {
    return metrics.find(name).counters().stream().mapToDouble(c -> c.count()).sum();
  }

  private static double transformed(SimpleMeterRegistry metrics) {
    return metrics.find("nolock.ownership.records.transformed").counters().stream()
        .mapToDouble(c -> c.count())
        .sum();
  }

  private static ExactlyOnceConfig config(
      KafkaBroker kafka, String input, String group, String txId, SimpleMeterRegistry metrics) {
    return ExactlyOnceConfig.custom(kafka.bootstrapServers(), input, group, txId)
        .sessionTimeout(TestOwners.SESSION_TIMEOUT)
        .maxPollInterval(Duration.ofSeconds(30))
        .pollTimeout(Duration.ofMillis(200))
        .transactionTimeout(Duration.ofSeconds(30))
        .closeTimeout(Duration.ofSeconds(10))
        .metrics(metrics, "test")
        .build();
  }

  static ExactlyOncePipeline<String, String, String, String> pipeline(
      ExactlyOnceConfig config, Transform<String, String, String, String> transform) {
    return ExactlyOncePipeline.create(
        config,
        new StringDeserializer(),
        new StringDeserializer(),
        new StringSerializer(),
        new StringSerializer(),
        transform);
  }

  /** The output names who wrote it and which input it came from. */
  private static ProducerRecord<String, String> out(
      String output, ConsumerRecord<String, String> record, String who) {
    return new ProducerRecord<>(output, record.key(), who + " " + record.value());
  }

  static List<String> inputIds(List<String> outputs) {
    return outputs.stream().map(v -> v.substring(v.indexOf(' ') + 1)).collect(Collectors.toList());
  }

  static void produceInputs(KafkaBroker kafka, String topic, int from, int count) throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      for (int i = from; i < from + count; i++) {
        producer.send(new ProducerRecord<>(topic, "key-" + (i % 17), "input-" + i));
      }
      producer.flush();
    }
  }

  /** Reads the topic from the start until at least {@code atLeast} values (or 30 s). */
  static List<String> read(KafkaBroker kafka, String topic, String isolation, int atLeast) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    List<String> values = new ArrayList<>();
    try (KafkaConsumer<String, String> consumer =
        new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
      List<TopicPartition> tps =
          consumer.partitionsFor(topic).stream()
              .map(p -> new TopicPartition(topic, p.partition()))
              .toList();
      consumer.assign(tps);
      consumer.seekToBeginning(tps);
      Map<TopicPartition, Long> end = consumer.endOffsets(tps);
      Awaitility.await(atLeast + " values on " + topic + " (" + isolation + ")")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(50))
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(r -> values.add(r.value()));
                return values.size() >= atLeast
                    || tps.stream().allMatch(tp -> consumer.position(tp) >= end.get(tp));
              });
    }
    return values;
  }

  /** Waits until {@code expected} committed values exist, then reads once more: no more appear. */
  static List<String> readExactly(KafkaBroker kafka, String topic, String isolation, int expected) {
    Awaitility.await(expected + " committed outputs")
        .atMost(Duration.ofSeconds(120))
        .pollInterval(Duration.ofMillis(500))
        .until(() -> read(kafka, topic, isolation, expected).size() >= expected);
    return read(kafka, topic, isolation, Integer.MAX_VALUE);
  }

  private static List<Throwable> causes(Throwable e) {
    List<Throwable> chain = new ArrayList<>();
    for (Throwable t = e; t != null && !chain.contains(t); t = t.getCause()) {
      chain.add(t);
      chain.addAll(List.of(t.getSuppressed()));
    }
    return chain;
  }
}
