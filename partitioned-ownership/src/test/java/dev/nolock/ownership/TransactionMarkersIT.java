package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Transactional producers and {@code read_committed}: a transaction's commit or abort marker, and
 * an aborted transaction's records, take offsets the consumer passes without handing a record to
 * the handler. The ownership row must move past them once the runner has passed them, or a
 * partition idle past retention has its log start above the row's next offset, and the next claim
 * seeks below the log start.
 *
 * <p>Partition 0 gets a committed transaction (offsets 0-2, marker 3) and an aborted one (4-5,
 * marker 6); partition 2 only an aborted one (0-1, marker 2), so its row stays at "nothing applied"
 * without the fix; partition 1 carries a sentinel that proves a later turn ran.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class TransactionMarkersIT {

  @Test
  void rowsMovePastMarkersSoANewOwnerAfterRetentionGoesOnAndAppliesEachLaterRecordOnce(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("tx-markers"), 3);
    String group = "owners-" + topic;
    TopicPartition p0 = new TopicPartition(topic, 0);
    TopicPartition p2 = new TopicPartition(topic, 2);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    try (KafkaProducer<String, String> producer = transactional(kafka, topic)) {
      producer.initTransactions();
      producer.beginTransaction();
      for (int i = 0; i < 3; i++) {
        producer.send(new ProducerRecord<>(topic, 0, "k", "committed-" + i));
      }
      producer.commitTransaction();
      producer.beginTransaction();
      for (int p : new int[] {0, 2}) {
        producer.send(new ProducerRecord<>(topic, p, "k", "aborted-0"));
        producer.send(new ProducerRecord<>(topic, p, "k", "aborted-1"));
      }
      producer.flush();
      producer.abortTransaction();
      // abortTransaction returns once the coordinator has decided; it writes the markers into the
      // partitions after that, so the last marker may not be there yet.
      await()
          .atMost(Duration.ofSeconds(30))
          .untilAsserted(
              () -> {
                assertThat(endOffset(kafka, p0))
                    .as("3 committed, their marker, 2 aborted, their marker")
                    .isEqualTo(7);
                assertThat(endOffset(kafka, p2)).as("2 aborted, their marker").isEqualTo(3);
              });
      long end0 = endOffset(kafka, p0);
      long end2 = endOffset(kafka, p2);

      SimpleMeterRegistry metrics = new SimpleMeterRegistry();
      try (PartitionOwner<String, String> first =
          owner(kafka, pg, topic, group, "first", ledger, metrics)) {
        first.start();
        Awaitility.await("the committed records of partition 0 applied")
            .atMost(Duration.ofSeconds(60))
            .until(() -> ledger.appliesPerOffset(0).size() == 3);
        // Sent after those applies and applied: the turn that applied them (and set the lag) ended.
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 1, "k", "sentinel"));
        producer.commitTransaction();
        Awaitility.await("the sentinel on partition 1 applied")
            .atMost(Duration.ofSeconds(60))
            .until(() -> ledger.appliesPerOffset(1).size() == 1);
        Awaitility.await("the consumer passed the markers and aborted records (lag 0)")
            .atMost(Duration.ofSeconds(60))
            .until(() -> lag(metrics, 0) == 0 && lag(metrics, 2) == 0);
        Awaitility.await("the rows moved past the markers at a commit interval, while running")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> {
                  Map<Integer, OwnerRows.Row> rows = OwnerRows.read(pg.dsl(), group, topic);
                  return rows.get(0).lastApplied() == end0 - 1
                      && rows.get(2).lastApplied() == end2 - 1;
                });
      }
      Map<Integer, OwnerRows.Row> afterFirst = OwnerRows.read(pg.dsl(), group, topic);

      // Retention: the partitions idle, their logs deleted up to their ends.
      deleteBefore(kafka, p0, end0);
      deleteBefore(kafka, p2, end2);
      try (PartitionOwner<String, String> second =
          owner(kafka, pg, topic, group, "second", ledger, new SimpleMeterRegistry())) {
        second.start();
        producer.beginTransaction();
        producer.send(new ProducerRecord<>(topic, 0, "k", "later-0"));
        producer.send(new ProducerRecord<>(topic, 2, "k", "later-2"));
        producer.commitTransaction();
        Awaitility.await("the later records applied, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () ->
                    !second.isRunning()
                        || (ledger.appliesPerOffset(0).containsKey(end0)
                            && ledger.appliesPerOffset(2).containsKey(end2)));
        assertThat(second.failure().toJavaOptional())
            .as("a new owner after retention must not stop on offsets that held only markers")
            .isEmpty();
      }
      assertThat(afterFirst.get(0).lastApplied())
          .as("partition 0's row after the runner passed the commit and abort markers")
          .isEqualTo(end0 - 1);
      assertThat(afterFirst.get(2).lastApplied())
          .as("partition 2's row after the runner passed an aborted transaction")
          .isEqualTo(end2 - 1);
      assertThat(ledger.appliesPerOffset(0))
          .as("the committed records and the later one, each once")
          .isEqualTo(Map.of(0L, 1, 1L, 1, 2L, 1, end0, 1));
      assertThat(ledger.appliesPerOffset(2))
          .as("the later record once, no aborted one")
          .isEqualTo(Map.of(end2, 1));
    }
  }

  private static PartitionOwner<String, String> owner(
      KafkaBroker kafka,
      PostgresSchema pg,
      String topic,
      String group,
      String id,
      AppliedLedger ledger,
      SimpleMeterRegistry metrics) {
    PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, id)
                .metrics(metrics, "test")
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            ledger.handler());
    owner.createTableIfMissing();
    return owner;
  }

  /** The lag gauge of an owned partition; -1 while it is not owned. */
  private static double lag(SimpleMeterRegistry metrics, int partition) {
    Gauge gauge =
        metrics.find("nolock.ownership.lag").tag("partition", Integer.toString(partition)).gauge();
    return gauge == null ? -1 : gauge.value();
  }

  private static KafkaProducer<String, String> transactional(KafkaBroker kafka, String topic) {
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, kafka.bootstrapServers());
    props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "markers-" + topic);
    return new KafkaProducer<>(props, new StringSerializer(), new StringSerializer());
  }

  private static long endOffset(KafkaBroker kafka, TopicPartition tp) throws Exception {
    return kafka
        .admin()
        .listOffsets(Map.of(tp, OffsetSpec.latest()))
        .partitionResult(tp)
        .get(30, TimeUnit.SECONDS)
        .offset();
  }

  private static void deleteBefore(KafkaBroker kafka, TopicPartition tp, long offset)
      throws Exception {
    kafka
        .admin()
        .deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
        .all()
        .get(30, TimeUnit.SECONDS);
  }
}
