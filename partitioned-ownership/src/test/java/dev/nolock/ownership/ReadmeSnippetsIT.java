package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Runs the README's Usage snippets as written (the variables they assume are set up here). */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  @Test
  void theOwnershipSnippetAppliesEachDepositOnce(KafkaBroker kafka, PostgresSchema pg)
      throws Exception {
    String bootstrap = kafka.bootstrapServers();
    String topic = kafka.createTopic(kafka.uniqueTopicName("account-commands"), 12);
    DataSource pool = pg.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();
    pg.dsl().execute("CREATE TABLE balances (account text PRIMARY KEY, cents bigint NOT NULL)");
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    KafkaProducer<String, String> producer =
        new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer());

    // --- README: Usage ---
    // Producers: each command goes to its key's partition, like the default partitioner.
    KeyRouter<String> router = KeyRouter.create(topic, 12, new StringSerializer());
    router.send(producer, "account-42", "deposit 100");
    router.send(producer, "account-42", "deposit 250");

    // Appliers: one runner per instance; the consumer group spreads the partitions.
    OwnershipConfig config =
        OwnershipConfig.custom(bootstrap, topic, "account-ledger")
            .sessionTimeout(Duration.ofSeconds(10))
            .metrics(registry, "account-ledger")
            .build();
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pool, // a HikariCP DataSource on PostgreSQL
            config,
            new StringDeserializer(),
            new StringDeserializer(),
            (record, tx, epoch) -> {
              // Runs in the transaction that checked this instance's epoch on the record's
              // partition and advanced its last applied offset: all of it commits, or none.
              long cents = Long.parseLong(record.value().substring("deposit ".length()));
              tx.execute(
                  "INSERT INTO balances (account, cents) VALUES (?, ?) ON CONFLICT (account) DO"
                      + " UPDATE SET cents = balances.cents + excluded.cents",
                  record.key(),
                  cents);
            })) {
      owner.createTableIfMissing(); // or run the README's DDL in your migrations
      owner.start();
      // ... serve; on shutdown, close() (try-with-resources) hands the partitions over.
      // --- end of snippet ---
      producer.flush();
      Awaitility.await("both deposits applied")
          .atMost(Duration.ofSeconds(60))
          .until(
              () ->
                  Long.valueOf(350)
                      .equals(
                          pg.dsl()
                              .fetchOptional(
                                  "SELECT cents FROM balances WHERE account = 'account-42'")
                              .map(r -> r.get(0, Long.class))
                              .orElse(null)));
      assertThat(owner.failure().toJavaOptional()).isEmpty();
      assertThat(
              registry.get("nolock.ownership.records.applied").counters().stream()
                  .mapToDouble(c -> c.count())
                  .sum())
          .isEqualTo(2);
    } finally {
      producer.close();
    }
  }

  @Test
  void theExactlyOnceSnippetEnrichesEachPaymentOnce(KafkaBroker kafka) throws Exception {
    String bootstrap = kafka.bootstrapServers();
    String payments = kafka.createTopic(kafka.uniqueTopicName("payments"), 3);
    String enriched = kafka.createTopic(kafka.uniqueTopicName("payments-enriched"), 3);
    int instance = 1;
    Properties producerProps = new Properties();
    producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(producerProps, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < 10; i++) {
        producer.send(new ProducerRecord<>(payments, "payment-" + i, "amount=" + i));
      }
    }

    // --- README: Usage, exactly once to another topic ---
    try (ExactlyOncePipeline<String, String, String, String> enricher =
        ExactlyOncePipeline.create(
            // the transactional.id: stable per instance, unique among running instances
            ExactlyOnceConfig.custom(
                    bootstrap, payments, "payment-enricher", "payment-enricher-" + instance)
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            new StringSerializer(),
            new StringSerializer(),
            record ->
                List.of(new ProducerRecord<>(enriched, record.key(), record.value() + ";eur")))) {
      enricher.start(); // fences any older producer with the same transactional.id first
      // --- end of snippet ---

      Properties props = new Properties();
      props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
      props.put(ConsumerConfig.GROUP_ID_CONFIG, "reader-" + enriched);
      props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
      props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
      List<String> values = new ArrayList<>();
      try (KafkaConsumer<String, String> reader =
          new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer())) {
        reader.subscribe(List.of(enriched));
        Awaitility.await("10 enriched payments")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> {
                  reader.poll(Duration.ofMillis(200)).forEach(r -> values.add(r.value()));
                  return values.size() >= 10;
                });
      }
      assertThat(values).hasSize(10).allMatch(v -> v.endsWith(";eur")).doesNotHaveDuplicates();
    }
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheOwnershipTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage").assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheExactlyOnceTestRuns() {
    ReadmeSnippet.javaBlock(README, "Exactly once to another topic:")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage, exactly once to another topic");
  }
}
