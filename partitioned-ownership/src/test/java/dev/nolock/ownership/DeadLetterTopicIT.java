package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.ApplyTransaction;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.RecordFailedException;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.Causes;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.testkit.CapturedStderr;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.EOFException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.jooq.exception.DataAccessException;
import org.jooq.exception.DataException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A record that fails for good (the handler throws, or the value deserializer cannot read it) with
 * and without a dead-letter topic, and a dead-letter topic the producer cannot reach.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class DeadLetterTopicIT {

  private static final String CARD = "4111-1111-1111-1111";
  private static final Duration WAIT = Duration.ofSeconds(60);

  /** Offset 3's value: the handler throws, quoting it. */
  private static final String POISON = "poison for card " + CARD;

  /** Offset 6's value: the deserializer throws, quoting it. */
  private static final String UNREADABLE = "garbage for card " + CARD;

  /** Reads values as strings, except those starting with "garbage": a parse error of the bytes. */
  private static final class StrictDeserializer implements Deserializer<String> {
    @Override
    public String deserialize(String topic, byte[] data) {
      String text = new String(data, StandardCharsets.UTF_8);
      if (text.startsWith("garbage")) {
        // As a JSON or protobuf parser reports input that ends too early.
        throw new SerializationException(
            "cannot read command '" + text + "'", new EOFException("unexpected end of input"));
      }
      return text;
    }
  }

  private static RecordHandler<String, String> failingOnPoison(AppliedLedger ledger) {
    RecordHandler<String, String> write = ledger.handler();
    return (record, tx, epoch) -> {
      write.apply(record, tx, epoch); // rolled back with the failure below
      if (record.value().startsWith("poison")) {
        // A value PostgreSQL refuses (SQLState 22P02): a data error, which this test's
        // deadLetterWhen marks as the record's own fault (nolock never assumes that on its own).
        tx.execute("SELECT CAST(? AS integer)", record.value());
      }
    };
  }

  /**
   * This application's poison: a data error of the handler (its data errors can only come from the
   * record) or a parse error of the deserializer (it calls no registry).
   */
  private static boolean poison(Throwable failure) {
    return SqlErrors.classify(failure) == SqlErrors.Kind.DATA
        || Causes.of(failure).stream().anyMatch(EOFException.class::isInstance);
  }

  /** 10 records on partition 0: "cmd-i", the poison at 3 and the unreadable one at 6. */
  private static void produce(KafkaBroker kafka, String topic) throws Exception {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<byte[], byte[]> producer =
        new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
      for (int i = 0; i < 10; i++) {
        String value = i == 3 ? POISON : i == 6 ? UNREADABLE : "cmd-" + i;
        RecordHeaders headers = new RecordHeaders();
        headers.add("trace-id", ("trace-" + i).getBytes(StandardCharsets.UTF_8));
        producer
            .send(
                new ProducerRecord<>(
                    topic,
                    0,
                    ("key-" + i).getBytes(StandardCharsets.UTF_8),
                    value.getBytes(StandardCharsets.UTF_8),
                    headers))
            .get();
      }
    }
  }

  /** Every record in {@code topic}, read from the start until {@code count} are in. */
  private static List<ConsumerRecord<byte[], byte[]>> readAll(
      KafkaBroker kafka, String topic, int count) {
    Properties props = new Properties();
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
    try (KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
      TopicPartition tp = new TopicPartition(topic, 0);
      consumer.assign(List.of(tp));
      consumer.seekToBeginning(List.of(tp));
      Awaitility.await(count + " records in " + topic)
          .atMost(WAIT)
          .until(
              () -> {
                consumer.poll(Duration.ofMillis(200)).forEach(read::add);
                return read.size() >= count
                    && consumer.position(tp) >= consumer.endOffsets(List.of(tp)).get(tp);
              });
    }
    return read;
  }

  private static String header(ConsumerRecord<?, ?> record, String name) {
    Header header = record.headers().lastHeader(name);
    return header == null ? null : new String(header.value(), StandardCharsets.UTF_8);
  }

  private static String text(byte[] bytes) {
    return new String(bytes, StandardCharsets.UTF_8);
  }

  @Test
  void poisonAndUnreadableRecordsGoToTheDeadLetterTopicAndTheRestApply(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("dlt-source"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    String logged;
    try (CapturedStderr log = new CapturedStderr();
        PartitionOwner<String, String> owner =
            PartitionOwner.create(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "dlt")
                    .deadLetterTopic(dlt)
                    .deadLetterWhen(DeadLetterTopicIT::poison)
                    .metrics(metrics, "dlt")
                    .build(),
                new StringDeserializer(),
                new StrictDeserializer(),
                failingOnPoison(ledger))) {
      owner.createTableIfMissing();
      owner.start();
      Awaitility.await("all 10 offsets handled")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 10);
      assertThat(owner.isRunning()).as("the runner did not stop").isTrue();
      logged = log.text();
    }
    assertThat(ledger.appliesPerOffset(0))
        .as("every record but the two dead-lettered applied once")
        .containsOnlyKeys(0L, 1L, 2L, 4L, 5L, 7L, 8L, 9L)
        .allSatisfy((offset, applies) -> assertThat(applies).isEqualTo(1));
    assertThat(
            metrics
                .get("nolock.ownership.records.dead.lettered")
                .tag("partition", "0")
                .counter()
                .count())
        .isEqualTo(2);
    assertThat(logged)
        .as("the log names the dead-lettered records, without their data")
        .contains(topic + "-0@3", topic + "-0@6", dlt)
        .doesNotContain(CARD);

    List<ConsumerRecord<byte[], byte[]>> dead = readAll(kafka, dlt, 2);
    assertThat(dead).hasSize(2);
    ConsumerRecord<byte[], byte[]> poison = dead.get(0);
    assertThat(text(poison.key())).isEqualTo("key-3");
    assertThat(text(poison.value())).as("the original bytes").isEqualTo(POISON);
    assertThat(header(poison, "trace-id")).as("the original headers").isEqualTo("trace-3");
    assertThat(header(poison, "nolock.dlt.topic")).isEqualTo(topic);
    assertThat(header(poison, "nolock.dlt.partition")).isEqualTo("0");
    assertThat(header(poison, "nolock.dlt.offset")).isEqualTo("3");
    assertThat(header(poison, "nolock.dlt.stage")).isEqualTo("handler");
    assertThat(header(poison, "nolock.dlt.exception")).isEqualTo(DataException.class.getName());
    ConsumerRecord<byte[], byte[]> unreadable = dead.get(1);
    assertThat(text(unreadable.key())).isEqualTo("key-6");
    assertThat(text(unreadable.value())).as("bytes no deserializer read").isEqualTo(UNREADABLE);
    assertThat(header(unreadable, "trace-id")).isEqualTo("trace-6");
    assertThat(header(unreadable, "nolock.dlt.offset")).isEqualTo("6");
    assertThat(header(unreadable, "nolock.dlt.stage")).isEqualTo("value-deserializer");
    assertThat(header(unreadable, "nolock.dlt.exception"))
        .isEqualTo(SerializationException.class.getName());
    for (ConsumerRecord<byte[], byte[]> record : dead) {
      for (Header h : record.headers()) {
        assertThat(text(h.value()))
            .as("no header carries the failure's message")
            .doesNotContain(CARD);
      }
    }
  }

  @Test
  void withoutADeadLetterTopicEachRunnerStopsAtThePoisonRecordInTurn(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("no-dlt"), 1);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic);
    for (String ownerId : List.of("first", "second")) {
      try (PartitionOwner<String, String> owner =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, ownerId).build(),
              new StringDeserializer(),
              new StrictDeserializer(),
              failingOnPoison(ledger))) {
        owner.createTableIfMissing();
        owner.start();
        assertThat(owner.awaitTermination(WAIT)).as(ownerId + " stopped").isTrue();
        assertThat(owner.failure().toJavaOptional())
            .get()
            .isInstanceOfSatisfying(
                RecordFailedException.class,
                e -> {
                  assertThat(e).hasMessageContaining(topic + "-0@3");
                  assertThat(e).hasMessageContaining("deadLetterTopic");
                  assertThat(e.getCause()).isInstanceOf(DataAccessException.class);
                });
      }
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied())
          .as(ownerId + " stopped at the poison record, rolled back")
          .isEqualTo(2);
    }

    // A runner whose handler takes the poison stops at the record it cannot read.
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, "third").build(),
            new StringDeserializer(),
            new StrictDeserializer(),
            ledger.handler())) {
      owner.start();
      assertThat(owner.awaitTermination(WAIT)).isTrue();
      assertThat(owner.failure().toJavaOptional())
          .get()
          .isInstanceOfSatisfying(
              RecordFailedException.class,
              e -> {
                assertThat(e)
                    .hasMessageContaining("value deserializer failed on " + topic + "-0@6");
                assertThat(e.getCause())
                    .isInstanceOf(RecordDeserializationException.class)
                    .hasCauseInstanceOf(SerializationException.class);
              });
    }
    assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()).isEqualTo(5);
    assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 1L, 2L, 3L, 4L, 5L);
  }

  @Test
  void aDeadLetterSendThatFailsIsNotRecordedAndTheRecordIsNotSkipped(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("dlt-missing"), 1);
    String dlt =
        kafka.uniqueTopicName("dlt-later"); // not created yet; the broker auto-creates none
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    produce(kafka, topic);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, "dlt-missing")
                .deadLetterTopic(dlt)
                .deadLetterWhen(DeadLetterTopicIT::poison)
                .deadLetterProducerProperty(ProducerConfig.MAX_BLOCK_MS_CONFIG, 300)
                .metrics(metrics, "dlt-missing")
                .build(),
            new StringDeserializer(),
            new StrictDeserializer(),
            failingOnPoison(ledger))) {
      owner.createTableIfMissing();
      owner.start();
      Awaitility.await("two failed sends to the dead-letter topic")
          .atMost(WAIT)
          .until(() -> metrics.get("nolock.ownership.backend.failures").counter().count() >= 2);
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied())
          .as("the poison record's offset is not recorded while its send fails")
          .isEqualTo(2);
      assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 1L, 2L);
      assertThat(owner.isRunning()).as("a retriable send failure backs off").isTrue();

      kafka.createTopic(dlt, 1);
      Awaitility.await("all 10 offsets handled once the dead-letter topic exists")
          .atMost(WAIT)
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 10);
    }
    assertThat(ledger.appliesPerOffset(0)).containsOnlyKeys(0L, 1L, 2L, 4L, 5L, 7L, 8L, 9L);
    assertThat(readAll(kafka, dlt, 2))
        .extracting(r -> header(r, "nolock.dlt.offset"))
        .as("each failed record in the dead-letter topic once: the failed sends wrote nothing")
        .containsExactly("3", "6");
  }

  private static ExactlyOnceConfig.Builder pipelineConfig(
      KafkaBroker kafka, String input, String txId, SimpleMeterRegistry metrics) {
    return ExactlyOnceConfig.custom(kafka.bootstrapServers(), input, "pipeline-" + input, txId)
        .sessionTimeout(TestOwners.SESSION_TIMEOUT)
        .maxPollInterval(Duration.ofSeconds(30))
        .pollTimeout(Duration.ofMillis(200))
        .transactionTimeout(Duration.ofSeconds(30))
        .closeTimeout(Duration.ofSeconds(10))
        .metrics(metrics, "test");
  }

  private static Transform<String, String, String, String> failingOnPoison(String output) {
    return record -> {
      if (record.value().startsWith("poison")) {
        throw new IllegalArgumentException("cannot transform " + record.value());
      }
      return List.of(new ProducerRecord<>(output, record.key(), record.value() + "!"));
    };
  }

  @Test
  void thePipelineCommitsDeadLettersInTheBatchTransactionExactlyOnce(KafkaBroker kafka)
      throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-dlt-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-dlt-out"), 1);
    String dlt = kafka.createTopic(kafka.uniqueTopicName("eos-dlt"), 1);
    produce(kafka, input);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    AtomicBoolean unreadableSeen = new AtomicBoolean();
    AtomicBoolean failedOnce = new AtomicBoolean();
    Deserializer<String> strict =
        (topic, data) -> {
          try {
            return new StrictDeserializer().deserialize(topic, data);
          } catch (SerializationException e) {
            unreadableSeen.set(true);
            throw e;
          }
        };
    StringSerializer strings = new StringSerializer();
    // Fails the first output after offset 6 was dead-lettered, so the transaction that sent that
    // dead letter aborts (an abort drops what the producer had not sent yet, so whether the
    // aborted dead letter reached the log is timing; the WARN lines count the sends).
    Serializer<String> failingOnceAfterTheUnreadable =
        (topic, value) -> {
          if (unreadableSeen.get() && failedOnce.compareAndSet(false, true)) {
            // Transient (a schema registry unreachable): aborted and retried, not dead-lettered.
            throw new SerializationException(
                "cannot write " + value, new java.net.ConnectException("registry unreachable"));
          }
          return strings.serialize(topic, value);
        };
    String logged;
    try (CapturedStderr log = new CapturedStderr();
        ExactlyOncePipeline<String, String, String, String> pipeline =
            ExactlyOncePipeline.create(
                pipelineConfig(kafka, input, "dlt-" + input, metrics)
                    .deadLetterTopic(dlt)
                    .deadLetterWhen(
                        e ->
                            e instanceof IllegalArgumentException
                                || Causes.of(e).stream().anyMatch(EOFException.class::isInstance))
                    .build(),
                new StringDeserializer(),
                strict,
                new StringSerializer(),
                failingOnceAfterTheUnreadable,
                failingOnPoison(output))) {
      pipeline.start();
      Awaitility.await("8 outputs and 2 dead letters committed")
          .atMost(WAIT)
          .until(
              () ->
                  metrics.get("nolock.ownership.records.dead.lettered").counter().count() == 2
                      && metrics.get("nolock.ownership.records.transformed").counter().count()
                          == 8);
      assertThat(pipeline.isRunning()).isTrue();
      logged = log.text();
    }
    assertThat(logged).contains(input + "-0@3", input + "-0@6").doesNotContain(CARD);
    assertThat(failedOnce).as("a transaction with a dead letter in it aborted").isTrue();
    assertThat(logged.split("sent to the dead-letter topic", -1))
        .as("more dead letters were sent than committed: one went with the aborted transaction")
        .hasSizeGreaterThan(2 + 1);
    assertThat(readAll(kafka, output, 8))
        .extracting(r -> text(r.value()))
        .containsExactly(
            "cmd-0!", "cmd-1!", "cmd-2!", "cmd-4!", "cmd-5!", "cmd-7!", "cmd-8!", "cmd-9!");
    List<ConsumerRecord<byte[], byte[]>> dead = readAll(kafka, dlt, 2);
    assertThat(dead)
        .as("each dead letter once for read_committed readers, though one was sent twice")
        .extracting(r -> header(r, "nolock.dlt.offset"))
        .containsExactly("3", "6");
    assertThat(text(dead.get(0).value())).isEqualTo(POISON);
    assertThat(header(dead.get(0), "nolock.dlt.stage")).isEqualTo("transform");
    assertThat(header(dead.get(0), "trace-id")).isEqualTo("trace-3");
    assertThat(text(dead.get(1).value())).isEqualTo(UNREADABLE);
    assertThat(header(dead.get(1), "nolock.dlt.stage")).isEqualTo("value-deserializer");
  }

  @Test
  void withoutADeadLetterTopicThePipelineStopsAtThePoisonRecord(KafkaBroker kafka)
      throws Exception {
    String input = kafka.createTopic(kafka.uniqueTopicName("eos-nodlt-in"), 1);
    String output = kafka.createTopic(kafka.uniqueTopicName("eos-nodlt-out"), 1);
    produce(kafka, input);
    try (ExactlyOncePipeline<String, String, String, String> pipeline =
        ExactlyOncePipeline.create(
            pipelineConfig(kafka, input, "nodlt-" + input, new SimpleMeterRegistry()).build(),
            new StringDeserializer(),
            new StrictDeserializer(),
            new StringSerializer(),
            new StringSerializer(),
            failingOnPoison(output))) {
      pipeline.start();
      assertThat(pipeline.awaitTermination(WAIT)).isTrue();
      assertThat(pipeline.failure().toJavaOptional())
          .get()
          .isInstanceOfSatisfying(
              RecordFailedException.class,
              e -> {
                assertThat(e).hasMessageContaining(input + "-0@3");
                assertThat(e.getCause()).isInstanceOf(IllegalArgumentException.class);
              });
    }
  }

  @Test
  void aZombieCannotRecordADeadLetteredOffset(PostgresSchema pg) {
    OwnerTable table = new OwnerTable(DSL.name(OwnershipConfig.DEFAULT_TABLE));
    Duration timeout = Duration.ofSeconds(5);
    table.createTableIfMissing(pg.dsl(), timeout);
    Map<Safeguards, ApplyOutcome> outcomes = new LinkedHashMap<>();
    for (Safeguards safeguards : List.of(Safeguards.ALL, new Safeguards(false, true))) {
      String topic = "zombie-dlt-" + UUID.randomUUID();
      table.register(pg.dsl(), "g", topic, 1, timeout);
      long stale = table.claim(pg.dsl(), "g", topic, 0, 1, "zombie", timeout, 0L).epoch();
      table.claim(pg.dsl(), "g", topic, 0, 1, "new-owner", timeout, 0L);
      ApplyTransaction<String, String> zombie =
          new ApplyTransaction<>(
              pg.dsl(),
              table,
              "g",
              "zombie",
              (record, tx, epoch) -> {},
              safeguards,
              timeout,
              timeout,
              false,
              failure -> false);
      outcomes.put(
          safeguards,
          zombie.recordDeadLettered(new ConsumerRecord<>(topic, 0, 0L, "k", "v"), stale));
      long lastApplied =
          pg.dsl()
              .fetchOne(
                  "SELECT last_applied_offset FROM "
                      + OwnershipConfig.DEFAULT_TABLE
                      + " WHERE topic = ?",
                  topic)
              .get(0, Long.class);
      if (safeguards == Safeguards.ALL) {
        assertThat(lastApplied).as("the zombie's offset write is refused").isEqualTo(-1);
      }
    }
    assertThat(outcomes.get(Safeguards.ALL)).isEqualTo(ApplyOutcome.FENCED);
    assertThat(outcomes.get(new Safeguards(false, true)))
        .as("control: without the epoch check the zombie's write is taken")
        .isEqualTo(ApplyOutcome.DEAD_LETTERED);
  }
}
