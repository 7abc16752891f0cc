package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Records fetched by a poll and still in hand when the point of no return passes ({@code
 * sessionTimeout - safetyMargin} after that poll was sent) are applied after the next poll, not
 * skipped.
 *
 * <p>The runner's clock is a manual one. Right after an apply whose batch still holds later records
 * (seen through {@link PolledRecords}), the clock moves past the point of no return, as a pause
 * between two applies would (three times, on the first records applied); the runner must stop
 * applying that batch and seek back to the first record it did not apply. Without that seek, the position is past those records, the offset check
 * ({@code last_applied_offset < :offset}) lets the next record through, and the ledger, which has no
 * unique key on (partition, offset), shows them with no apply.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class PointOfNoReturnKeepsFetchedRecordsIT {

  private static final int RECORDS = 150;
  private static final int PAUSES = 3;

  @Test
  void recordsInHandWhenThePointOfNoReturnPassesAreAppliedOnceNotSkipped(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("point-of-no-return"), 1);
    String group = "owners-" + topic;
    String ownerId = "paused-between-applies";
    String clientId = "owner-" + ownerId; // TestOwners' client.id
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    ManualLeaseClock clock = new ManualLeaseClock();
    AtomicInteger pauses = new AtomicInteger();
    AtomicLong inHandAtPauses = new AtomicLong();
    RecordingEvents events =
        new RecordingEvents() {
          @Override
          public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
            super.outcome(partition, offset, epoch, outcome);
            PolledRecords.Range batch = PolledRecords.peek(clientId).get(partition);
            if (outcome == ApplyOutcome.APPLIED
                && batch != null
                && batch.last() > offset
                && pauses.get() < PAUSES) {
              pauses.incrementAndGet();
              inHandAtPauses.addAndGet(batch.last() - offset);
              clock.advance(TestOwners.SESSION_TIMEOUT);
            }
          }
        };

    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    try (KafkaProducer<String, String> producer =
            new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
        PartitionOwner<String, String> owner =
            PartitionOwner.withSafeguards(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, ownerId)
                    .clock(clock)
                    // Small batches: without the rewind each pause drops the rest of one batch,
                    // and the records after the last pause are applied, so the skipped ones show
                    // as gaps rather than as a position that never reaches the end.
                    .maxPollRecords(20)
                    .consumerProperty(
                        ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, PolledRecords.class.getName())
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                ledger.handler(),
                Safeguards.ALL,
                events)) {
      for (int i = 0; i < RECORDS; i++) {
        producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i));
      }
      producer.flush();
      owner.createTableIfMissing();
      owner.start();
      await("all " + RECORDS + " records applied, or the runner stopped")
          .atMost(Duration.ofSeconds(60))
          .until(
              () ->
                  (OwnerRows.read(pg.dsl(), group, topic).containsKey(0)
                          && OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()
                              >= RECORDS - 1)
                      || !owner.isRunning());
      assertThat(owner.failure()).isEmpty();
    }

    assertThat(pauses.get())
        .as("the point of no return passed with later records of the batch in hand")
        .isEqualTo(PAUSES);
    assertThat(inHandAtPauses.get()).isPositive();
    assertThat(ledger.notAppliedOnce(0, RECORDS))
        .as(
            "every record is applied once (offset -> applies; 0 = skipped: in hand when the point"
                + " of no return passed, dropped without a rewind)")
        .isEmpty();
  }
}
