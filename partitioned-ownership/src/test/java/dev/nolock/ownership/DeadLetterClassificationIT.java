package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.RecordFailedException;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Causes;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ConnectException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * With a dead-letter topic, only a poison record goes there: a transient failure (a backend that
 * says "retry later", a deserializer whose schema registry is unreachable) is retried, a schema
 * error stops the runner, a serializer failure is the input record's failure, and a run of dead
 * letters that looks systemic stops the runner.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class DeadLetterClassificationIT {

  private static final Duration WAIT = Duration.ofSeconds(30);

  /** A predicate that marks every failure: the fixed stop and retry rules still come first. */
  private static final Predicate<Throwable> EVERYTHING = failure -> true;

  /** A typical predicate: the handler's validation error means the record is poison. */
  private static final Predicate<Throwable> VALIDATION =
      failure -> failure instanceof IllegalArgumentException;

  /** {@code values} on partition 0, keys "key-i". */
  private static void produce(KafkaBroker kafka, String topic, List<String> values)
      throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < values.size(); i++) {
        producer.send(new ProducerRecord<>(topic, 0, "key-" + i, values.get(i))).get();
      }
    }
  }

  private static List<String> commands(int count) {
    List<String> values = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      values.add("cmd-" + i);
    }
    return values;
  }

  /** Every record in {@code topic} ({@code read_committed}), once its end offset is reached. */
  private static List<ConsumerRecord<byte[], byte[]>> readAll(KafkaBroker kafka, String topic) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      TopicPartition tp = new TopicPartition(topic, 0);
      consumer.assign(List.of(tp));
      consumer.seekToBeginning(List.of(tp));
      Awaitility.await("the end of " + topic)
          .atMost(WAIT)
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(100)).forEach(read::add);
                return consumer.position(tp) >= consumer.endOffsets(List.of(tp)).get(tp);
              });
    }
    return read;
  }

  private static String header(ConsumerRecord<?, ?> record, String name) {
    return new String(record.headers().lastHeader(name).value(), StandardCharsets.UTF_8);
  }

  private PartitionOwner<String, String> owner(
      KafkaBroker kafka,
      PostgresSchema pg,
      String topic,
      OwnershipConfig.Builder config,
      Deserializer<String> values,
      RecordHandler<String, String> handler) {
    PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(), config.build(), new StringDeserializer(), values, handler);
    owner.createTableIfMissing();
    return owner;
  }

  /** The runner stopped on {@code topic}'s offset 2 and did not take it for poison. */
  private static RecordFailedException stoppedAtOffsetTwo(
      PartitionOwner<String, String> owner, String topic) throws InterruptedException {
    assertThat(owner.awaitTermination(WAIT)).as("the runner stopped").isTrue();
    assertThat(owner.failure().toJavaOptional()).get().isInstanceOf(RecordFailedException.class);
    RecordFailedException failure = (RecordFailedException) owner.failure().get();
    assertThat(failure).hasMessageContaining(topic + "-0@2");
    assertThat(failure.deadLetterable()).as("not taken for poison").isFalse();
    return failure;
  }

  @Test
  void aBackendThatSaysRetryLaterIsRetriedNotDeadLettered(KafkaBroker kafka, PostgresSchema pg)
      throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-retry"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-retry-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    RecordHandler<String, String> write = ledger.handler();
    AtomicInteger unavailable = new AtomicInteger(2);
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2 && unavailable.getAndDecrement() > 0) {
            throw new BackendUnavailableException(
                "Redis unreachable; retry later", new IllegalStateException("no connection"));
          }
          write.apply(record, tx, epoch);
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "retry")
                .deadLetterTopic(dlt)
                .deadLetterWhen(EVERYTHING),
            new StringDeserializer(),
            handler)) {
      owner.start();
      Awaitility.await("all 5 offsets handled")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 5);
    }
    assertThat(unavailable.get()).as("the backend failed twice").isNegative();
    assertThat(ledger.appliesPerOffset(0))
        .containsOnlyKeys(0L, 1L, 2L, 3L, 4L)
        .allSatisfy((offset, applies) -> assertThat(applies).isEqualTo(1));
    assertThat(readAll(kafka, dlt)).as("nothing dead-lettered").isEmpty();
  }

  @Test
  void aMissingTableStopsTheRunnerAndIsNotDeadLettered(KafkaBroker kafka, PostgresSchema pg)
      throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-schema"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-schema-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    RecordHandler<String, String> write = ledger.handler();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2) {
            tx.execute("INSERT INTO table_of_the_next_deploy VALUES (1)"); // 42P01
          }
          write.apply(record, tx, epoch);
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "schema")
                .deadLetterTopic(dlt)
                .deadLetterWhen(EVERYTHING),
            new StringDeserializer(),
            handler)) {
      owner.start();
      stoppedAtOffsetTwo(owner, topic);
    }
    assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()).isEqualTo(1);
    assertThat(readAll(kafka, dlt)).as("nothing dead-lettered").isEmpty();
  }

  @Test
  void anUnknownHandlerFailureStopsTheRunnerEvenWithADeadLetterTopic(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-unknown"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-unknown-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    RecordHandler<String, String> write = ledger.handler();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2) {
            // Not known to be the record's fault (a bug, a dependency's state): never skipped.
            throw new IllegalStateException("the cache is not warmed up");
          }
          write.apply(record, tx, epoch);
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "unknown")
                .deadLetterTopic(dlt)
                .deadLetterWhen(VALIDATION),
            new StringDeserializer(),
            handler)) {
      owner.start();
      assertThat(stoppedAtOffsetTwo(owner, topic)).hasMessageContaining("deadLetterWhen");
    }
    assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()).isEqualTo(1);
    assertThat(readAll(kafka, dlt)).as("nothing dead-lettered").isEmpty();
    assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 1L);
  }

  @Test
  void aHandlerThatFailsPastThePointOfNoReturnBacksOffBeforeTryingAgain(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-slow"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-slow-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    ManualLeaseClock clock = new ManualLeaseClock();
    AtomicInteger slowFailuresLeft = new AtomicInteger(1);
    RecordHandler<String, String> write = ledger.handler();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2) {
            if (slowFailuresLeft.getAndDecrement() > 0) {
              clock.advance(TestOwners.SESSION_TIMEOUT); // it took a whole session to fail
            }
            throw new IllegalArgumentException("cannot apply " + record.value());
          }
          write.apply(record, tx, epoch);
        };
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "slow")
                .clock(clock)
                .metrics(metrics, "slow")
                .deadLetterTopic(dlt)
                .deadLetterWhen(e -> e instanceof IllegalArgumentException),
            new StringDeserializer(),
            handler)) {
      owner.start();
      Awaitility.await("a backoff, counted, not a hot loop of polls")
          .atMost(WAIT)
          .until(() -> metrics.get("nolock.ownership.backend.failures").counter().count() == 1);
      clock.advance(Duration.ofMinutes(1)); // the backoff is over
      Awaitility.await("all 5 offsets handled")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 5);
    }
    assertThat(readAll(kafka, dlt))
        .extracting(r -> header(r, "nolock.dlt.offset"))
        .containsExactly("2");
  }

  @Test
  void aDeserializerWhoseRegistryIsUnreachableIsRetriedNotDeadLettered(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-registry"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-registry-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    AtomicInteger unreachable = new AtomicInteger(2);
    StringDeserializer strings = new StringDeserializer();
    Deserializer<String> registryClient =
        (t, data) -> {
          String value = strings.deserialize(t, data);
          if (value.equals("cmd-2") && unreachable.getAndDecrement() > 0) {
            throw new SerializationException(
                "Error retrieving schema", new ConnectException("Connection refused"));
          }
          return value;
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "registry")
                .deadLetterTopic(dlt)
                .deadLetterWhen(EVERYTHING),
            registryClient,
            ledger.handler())) {
      owner.start();
      Awaitility.await("all 5 offsets handled")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 5);
    }
    assertThat(ledger.appliesPerOffset(0))
        .containsOnlyKeys(0L, 1L, 2L, 3L, 4L)
        .allSatisfy((offset, applies) -> assertThat(applies).isEqualTo(1));
    assertThat(readAll(kafka, dlt)).as("nothing dead-lettered").isEmpty();
  }

  /** Like a schema registry client's exception for an HTTP 500: neither I/O nor the bytes. */
  static final class RegistryAnswered extends Exception {
    private static final long serialVersionUID = 1L;

    RegistryAnswered() {
      super("Internal Server Error; error code: 50001");
    }
  }

  @Test
  void aDeserializerWhoseRegistryAnsweredAnErrorStopsTheRunnerAndIsNotDeadLettered(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-registry500"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-registry500-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    StringDeserializer strings = new StringDeserializer();
    Deserializer<String> registryClient =
        (t, data) -> {
          String value = strings.deserialize(t, data);
          if (value.equals("cmd-2")) {
            throw new SerializationException("Error retrieving schema", new RegistryAnswered());
          }
          return value;
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "registry500")
                .deadLetterTopic(dlt)
                .deadLetterWhen(VALIDATION),
            registryClient,
            ledger.handler())) {
      owner.start();
      stoppedAtOffsetTwo(owner, topic);
    }
    assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()).isEqualTo(1);
    assertThat(readAll(kafka, dlt)).as("a good record is never skipped").isEmpty();
  }

  @Test
  void aConstraintThatAMigrationAddedStopsTheRunnerAndIsNotDeadLettered(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-migration"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-migration-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    pg.dsl().execute("CREATE TABLE shipments (id text PRIMARY KEY, carrier text)");
    produce(kafka, topic, commands(5));
    RecordHandler<String, String> write = ledger.handler();
    AtomicBoolean migrated = new AtomicBoolean();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2 && migrated.compareAndSet(false, true)) {
            // A migration ran ahead of the deploy that fills carrier: from here on every record
            // fails with 23514, good ones included.
            pg.dsl()
                .execute(
                    "ALTER TABLE shipments ADD CONSTRAINT carrier_set"
                        + " CHECK (carrier IS NOT NULL) NOT VALID");
          }
          write.apply(record, tx, epoch);
          tx.execute("INSERT INTO shipments (id) VALUES (?)", record.value());
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "migration")
                .deadLetterTopic(dlt)
                .deadLetterWhen(VALIDATION),
            new StringDeserializer(),
            handler)) {
      owner.start();
      stoppedAtOffsetTwo(owner, topic);
    }
    assertThat(readAll(kafka, dlt)).as("good records are never skipped").isEmpty();
    assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 1L);
  }

  /** Like Apache HttpClient's NoHttpResponseException: a lost connection that is no java.net. */
  static final class NoHttpResponse extends IOException {
    private static final long serialVersionUID = 1L;

    NoHttpResponse() {
      super("The target server failed to respond");
    }
  }

  @Test
  void withoutADeadLetterTopicAHandlersIoFailureIsRetriedAsBefore(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-io"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic, commands(5));
    RecordHandler<String, String> write = ledger.handler();
    AtomicInteger lostResponses = new AtomicInteger(1);
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.offset() == 2 && lostResponses.getAndDecrement() > 0) {
            throw new UncheckedIOException(new NoHttpResponse());
          }
          write.apply(record, tx, epoch);
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "io"),
            new StringDeserializer(),
            handler)) {
      owner.start();
      Awaitility.await("all 5 offsets handled")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 5);
      assertThat(owner.failure().toJavaOptional()).as("the runner did not stop").isEmpty();
    }
    assertThat(lostResponses.get()).as("the response was lost once").isNegative();
    assertThat(ledger.appliesPerOffset(0))
        .containsOnlyKeys(0L, 1L, 2L, 3L, 4L)
        .allSatisfy((offset, applies) -> assertThat(applies).isEqualTo(1));
  }

  @Test
  void aRunOfDeadLettersPastTheLimitStopsTheRunner(KafkaBroker kafka, PostgresSchema pg)
      throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("cls-breaker"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-breaker-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(
        kafka, topic, List.of("cmd-0", "poison-1", "cmd-2", "poison-3", "poison-4", "poison-5"));
    RecordHandler<String, String> write = ledger.handler();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (record.value().startsWith("poison")) {
            throw new IllegalArgumentException("cannot apply " + record.value());
          }
          write.apply(record, tx, epoch);
        };
    try (PartitionOwner<String, String> owner =
        owner(
            kafka,
            pg,
            topic,
            TestOwners.config(kafka.bootstrapServers(), topic, group, "breaker")
                .deadLetterTopic(dlt)
                .deadLetterWhen(e -> e instanceof IllegalArgumentException)
                .maxConsecutiveDeadLetters(2),
            new StringDeserializer(),
            handler)) {
      owner.start();
      assertThat(owner.awaitTermination(WAIT)).as("the runner stopped").isTrue();
      assertThat(owner.failure().toJavaOptional())
          .get()
          .satisfies(
              e ->
                  assertThat(e)
                      .hasMessageContaining("maxConsecutiveDeadLetters")
                      .hasMessageContaining(topic + "-0@5"));
    }
    assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied())
        .as("stopped at the third failure in a row; the applied cmd-2 had reset the count")
        .isEqualTo(4);
    assertThat(readAll(kafka, dlt))
        .extracting(r -> header(r, "nolock.dlt.offset"))
        .containsExactly("1", "3", "4");
    assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 2L);
  }

  private static ExactlyOnceConfig.Builder pipelineConfig(KafkaBroker kafka, String input) {
    return ExactlyOnceConfig.custom(kafka.bootstrapServers(), input, "p-" + input, "tx-" + input)
        .sessionTimeout(TestOwners.SESSION_TIMEOUT)
        .maxPollInterval(Duration.ofSeconds(30))
        .pollTimeout(Duration.ofMillis(200))
        .transactionTimeout(Duration.ofSeconds(30))
        .closeTimeout(Duration.ofSeconds(10))
        .metrics(new SimpleMeterRegistry(), "test");
  }

  /** Fails for "cmd-4!" every time. */
  private static final Serializer<String> FAILS_ON_FOUR =
      (topic, value) -> {
        if (value.equals("cmd-4!")) {
          throw new IllegalArgumentException("cannot write " + value);
        }
        return value.getBytes(StandardCharsets.UTF_8);
      };

  private static Transform<String, String, String, String> exclaim(String output) {
    return record -> List.of(new ProducerRecord<>(output, record.key(), record.value() + "!"));
  }

  @Test
  void withoutADeadLetterTopicASerializerFailureStopsThePipeline(KafkaBroker kafka)
      throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("cls-ser-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("cls-ser-out"), 1);
    produce(kafka, input, commands(8));
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        ExactlyOncePipeline.create(
            pipelineConfig(kafka, input).build(),
            new StringDeserializer(),
            new StringDeserializer(),
            new StringSerializer(),
            FAILS_ON_FOUR,
            exclaim(output))) {
      pipeline.start();
      assertThat(pipeline.awaitTermination(Duration.ofSeconds(15)))
          .as("the pipeline stopped instead of transforming the batch again and again")
          .isTrue();
      assertThat(pipeline.failure().toJavaOptional())
          .get()
          .isInstanceOfSatisfying(
              RecordFailedException.class,
              e -> {
                assertThat(e)
                    .hasMessageContaining(input + "-0@4")
                    .hasMessageContaining("serializer");
                assertThat(e.stage()).isEqualTo(RecordFailedException.Stage.SERIALIZER);
              });
    }
    assertThat(readAll(kafka, output)).as("the batch was aborted").isEmpty();
  }

  @Test
  void withADeadLetterTopicASerializerFailureMarkedAsPoisonDeadLettersItsInput(KafkaBroker kafka)
      throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("cls-serdlt-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("cls-serdlt-out"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("cls-serdlt-dlt"), 1);
    produce(kafka, input, commands(8));
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        ExactlyOncePipeline.create(
            pipelineConfig(kafka, input)
                .deadLetterTopic(dlt)
                // A serializer's input is the transform's output: only the user knows whether its
                // failure is the input record's fault.
                .deadLetterWhen(
                    e -> Causes.of(e).stream().anyMatch(IllegalArgumentException.class::isInstance))
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            new StringSerializer(),
            FAILS_ON_FOUR,
            exclaim(output))) {
      pipeline.start();
      Awaitility.await("7 outputs").atMost(WAIT).until(() -> readAll(kafka, output).size() >= 7);
      assertThat(pipeline.isRunning()).isTrue();
    }
    assertThat(readAll(kafka, output))
        .extracting(r -> new String(r.value(), StandardCharsets.UTF_8))
        .containsExactly("cmd-0!", "cmd-1!", "cmd-2!", "cmd-3!", "cmd-5!", "cmd-6!", "cmd-7!");
    List<ConsumerRecord<byte[], byte[]>> dead = readAll(kafka, dlt);
    assertThat(dead).extracting(r -> header(r, "nolock.dlt.offset")).containsExactly("4");
    assertThat(header(dead.get(0), "nolock.dlt.stage")).isEqualTo("serializer");
    assertThat(new String(dead.get(0).value(), StandardCharsets.UTF_8)).isEqualTo("cmd-4");
  }
}
