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
import java.sql.SQLException;
import java.time.Duration;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.UnaryOperator;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A runner that stops applying a batch {@code poll()} returned, while later records of the batch
 * are still in hand, applies those records after the next poll, once each. The poll moved the
 * consumer's position past them, and the offset check ({@code last_applied_offset < :offset}) lets
 * any later record through, so only the runner's seek back to the first record it did not apply
 * keeps them from being skipped for good, with no error and no metric.
 *
 * <p>One test per way a batch stops: the point of no return passes ({@code sessionTimeout -
 * safetyMargin} after the poll was sent: a manual clock moved between two applies, as a pause
 * would), and an apply fails on a transient PostgreSQL error (a serialization failure, 40001; the
 * runner backs off). A backoff started by a failed claim is the third way ({@link
 * FailedClaimRetryKeepsFetchedRecordsIT}, {@link FrozenOwnerHoldingRowLockIT}). Each stop happens
 * three times, right after an apply whose batch (seen through {@link PolledRecords}) still holds
 * later records. Batches are small (20 records), so that without the seek each stop drops the rest
 * of one batch and the records after the last stop are applied: the skipped ones show as gaps in
 * the ledger, which has no unique key on (partition, offset), rather than as a position that never
 * reaches the end.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class StoppedBatchKeepsFetchedRecordsIT {

  private static final int RECORDS = 150;
  private static final int STOPS = 3;

  @Test
  void recordsInHandWhenThePointOfNoReturnPassesAreAppliedOnceNotSkipped(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    Run run = new Run("point-of-no-return");
    run.events =
        new RecordingEvents() {
          @Override
          public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
            super.outcome(partition, offset, epoch, outcome);
            if (outcome == ApplyOutcome.APPLIED && run.stopHere(partition, offset)) {
              clock.advance(TestOwners.SESSION_TIMEOUT);
            }
          }
        };
    run.execute(kafka, pg, config -> config.clock(clock), run.ledger(pg).handler());
  }

  @Test
  void recordsInHandWhenAnApplyFailsTransientlyAreAppliedOnceNotSkipped(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    Run run = new Run("failed-apply");
    run.events = new RecordingEvents();
    RecordHandler<String, String> ledger = run.ledger(pg).handler();
    Set<Long> failed = ConcurrentHashMap.newKeySet();
    RecordHandler<String, String> handler =
        (record, tx, epoch) -> {
          if (!failed.contains(record.offset())
              && run.stopHere(record.partition(), record.offset())) {
            failed.add(record.offset());
            throw new DataAccessException(
                "could not serialize access", new SQLException("injected", "40001"));
          }
          ledger.apply(record, tx, epoch);
        };
    run.execute(kafka, pg, UnaryOperator.identity(), handler);
    assertThat(run.events.backoffs).as("each failed apply backed the runner off").hasSize(STOPS);
  }

  /** One runner on a one-partition topic, stopped {@link #STOPS} times in a batch. */
  private static final class Run {
    final String ownerId;
    final String clientId;
    final AtomicInteger stops = new AtomicInteger();
    final AtomicLong inHandAtStops = new AtomicLong();
    RecordingEvents events;
    AppliedLedger ledger;

    Run(String ownerId) {
      this.ownerId = ownerId;
      this.clientId = "owner-" + ownerId; // TestOwners' client.id
    }

    AppliedLedger ledger(PostgresSchema pg) {
      ledger = AppliedLedger.fresh(pg.dsl());
      return ledger;
    }

    /** On the loop thread: stop the batch at this record? (Counts it if so.) */
    boolean stopHere(int partition, long offset) {
      PolledRecords.Range batch = PolledRecords.peek(clientId).get(partition);
      if (batch == null || batch.last() <= offset || stops.get() >= STOPS) {
        return false;
      }
      stops.incrementAndGet();
      inHandAtStops.addAndGet(batch.last() - offset);
      return true;
    }

    void execute(
        KafkaBroker kafka,
        PostgresSchema pg,
        UnaryOperator<OwnershipConfig.Builder> configure,
        RecordHandler<String, String> handler)
        throws Exception {
      String topic = kafka.createTopic(kafka.uniqueTopicName(ownerId), 1);
      String group = "owners-" + topic;
      Properties props = new Properties();
      props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
      props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
      props.put(ProducerConfig.ACKS_CONFIG, "all");
      try (KafkaProducer<String, String> producer =
              new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
          PartitionOwner<String, String> owner =
              PartitionOwner.withSafeguards(
                  pg.dataSource(),
                  configure
                      .apply(TestOwners.config(kafka.bootstrapServers(), topic, group, ownerId))
                      .maxPollRecords(20)
                      .consumerProperty(
                          ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, PolledRecords.class.getName())
                      .build(),
                  new StringDeserializer(),
                  new StringDeserializer(),
                  handler,
                  Safeguards.ALL,
                  events)) {
        for (int i = 0; i < RECORDS; i++) {
          producer.send(new ProducerRecord<>(topic, 0, "k", "v" + i));
        }
        producer.flush();
        owner.createTableIfMissing();
        owner.start();
        await("the partition's position reaches the last record, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () ->
                    OwnerRows.appliedThrough(pg.dsl(), group, topic) == RECORDS
                        || !owner.isRunning());
        assertThat(owner.failure().toJavaOptional()).isEmpty();
      }

      assertThat(stops.get())
          .as("the batch stopped with later records in hand (the scenario happened)")
          .isEqualTo(STOPS);
      assertThat(inHandAtStops.get()).isPositive();
      assertThat(ledger.notAppliedOnce(0, RECORDS))
          .as(
              "every record is applied once (offset -> applies; 0 = skipped: in hand when the"
                  + " batch stopped, dropped without a seek back)")
          .isEmpty();
    }
  }
}
