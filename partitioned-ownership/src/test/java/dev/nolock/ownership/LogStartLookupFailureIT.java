package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The log start lookup of a never-applied partition fails (standing for a partition without a
 * leader: the test hook throws what {@code beginningOffsets} would): only that partition waits,
 * unclaimed and retried each turn; the runner's other partition goes on applying, no backoff starts
 * and no PostgreSQL failure is counted. Once the lookup answers, the partition is claimed and each
 * of its records applies once.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class LogStartLookupFailureIT {

  private static final int ON_P0 = 4;
  private static final int APPLIED_ON_P1 = 3;
  private static final int MORE_ON_P1 = 5;

  @Test
  void aFailedLookupLeavesOnlyItsPartitionUnclaimedAndTheOthersApply(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-lookup"), 2);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    AtomicBoolean lookupFails = new AtomicBoolean(true);
    AtomicInteger failedLookupsOfP0 = new AtomicInteger();
    RecordingEvents events =
        new RecordingEvents() {
          @Override
          public void beforeLogStartLookup(Set<Integer> partitions) {
            if (partitions.contains(0) && lookupFails.get()) {
              failedLookupsOfP0.incrementAndGet();
              throw new KafkaException("test: no leader for partition 0");
            }
          }
        };
    try (KafkaProducer<String, String> producer = producer(kafka)) {
      send(producer, topic, 0, ON_P0);
      send(producer, topic, 1, APPLIED_ON_P1 + MORE_ON_P1);
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "lookup")
                  .metrics(metrics, "test")
                  .build(),
              new StringDeserializer(),
              new StringDeserializer(),
              ledger.handler(),
              Safeguards.ALL,
              events)) {
        owner.createTableIfMissing();
        // Partition 1 has applied its first records already: its claim needs no lookup.
        pg.dsl()
            .execute(
                "INSERT INTO "
                    + OwnershipConfig.DEFAULT_TABLE
                    + " (consumer_group, topic, partition, partition_count, epoch,"
                    + " last_applied_offset) VALUES (?, ?, 0, 2, 0, -1), (?, ?, 1, 2, 3, ?)",
                group,
                topic,
                group,
                topic,
                APPLIED_ON_P1 - 1);
        owner.start();
        Awaitility.await("the lookup for partition 0 failed 3 times")
            .atMost(Duration.ofSeconds(60))
            .until(() -> failedLookupsOfP0.get() >= 3);
        assertThat(metrics.get("nolock.ownership.backend.failures").counter().count())
            .as("a failed Kafka lookup is not a PostgreSQL failure and starts no backoff")
            .isZero();
        Awaitility.await("partition 1's records applied while partition 0's lookup fails")
            .atMost(Duration.ofSeconds(60))
            .until(
                () ->
                    OwnerRows.read(pg.dsl(), group, topic).get(1).lastApplied()
                        == APPLIED_ON_P1 + MORE_ON_P1 - 1);
        assertThat(owner.ownedPartitions()).doesNotContainKey(0);
        assertThat(events.backoffs).as("no backoff").isEmpty();
        assertThat(metrics.get("nolock.ownership.log.start.lookup.failures").counter().count())
            .as("counted apart (the lookup at start, before the rows are recorded, is not)")
            .isPositive();

        lookupFails.set(false);
        Awaitility.await("partition 0 claimed and applied once its lookup answers")
            .atMost(Duration.ofSeconds(60))
            .until(() -> OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied() == ON_P0 - 1);
        assertThat(owner.failure().toJavaOptional()).isEmpty();
      }
      Map<Long, Integer> once = new TreeMap<>();
      for (long offset = 0; offset < ON_P0; offset++) {
        once.put(offset, 1);
      }
      assertThat(ledger.appliesPerOffset(0)).isEqualTo(once);
      Map<Long, Integer> onceOnP1 = new TreeMap<>();
      for (long offset = APPLIED_ON_P1; offset < APPLIED_ON_P1 + MORE_ON_P1; offset++) {
        onceOnP1.put(offset, 1);
      }
      assertThat(ledger.appliesPerOffset(1)).isEqualTo(onceOnP1);
    }
  }

  private static KafkaProducer<String, String> producer(KafkaBroker kafka) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
  }

  private static void send(
      KafkaProducer<String, String> producer, String topic, int partition, int count)
      throws Exception {
    for (int i = 0; i < count; i++) {
      producer.send(new ProducerRecord<>(topic, partition, "k", "v")).get(30, TimeUnit.SECONDS);
    }
  }
}
