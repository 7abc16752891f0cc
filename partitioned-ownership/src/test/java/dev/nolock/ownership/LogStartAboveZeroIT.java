package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.assertj.core.api.InstanceOfAssertFactories;
import org.awaitility.Awaitility;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A partition whose log no longer starts at offset 0 ({@code deleteRecords}, as retention does),
 * claimed with nothing applied yet: the runner starts at the log's first record, a rewind before
 * the first apply goes back to that record, not to offset 0 (which Kafka answers with {@code
 * OffsetOutOfRangeException}, the runner's signal that records were deleted before they were
 * applied), and records deleted after the first claim and before they were applied stop the runner,
 * whichever owner claims next.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class LogStartAboveZeroIT {

  private static final int SENT = 10;
  private static final long LOG_START = 4;

  @Test
  void aFirstApplyThatFailsOnceIsRetriedFromTheLogStartAndEveryRemainingRecordAppliesOnce(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    AtomicInteger failuresLeft = new AtomicInteger(1);
    RecordHandler<String, String> applied = ledger.handler();
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try {
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      try (PartitionOwner<String, String> owner =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "log-start")
                  .meterRegistry(metrics)
                  .build(),
              new StringDeserializer(),
              new StringDeserializer(),
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch); // rolled back by the failure below
                if (failuresLeft.getAndDecrement() > 0) {
                  throw new DataAccessException(
                      "could not serialize access", new SQLException("serialization", "40001"));
                }
              })) {
        owner.createTableIfMissing();
        owner.start();
        Awaitility.await("every record from the log start applied, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () ->
                    !owner.isRunning()
                        || OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied() == SENT - 1);
        assertThat(owner.failure())
            .as("the rewind after the failed first apply must not be read as data lost")
            .isEmpty();
        assertThat(owner.isRunning()).isTrue();
        assertThat(failuresLeft.get())
            .as("the first apply failed once, then was retried")
            .isNegative();
        assertThat(metrics.get("nolock.ownership.backend.failures").counter().count())
            .as("the one transient failure, nothing else")
            .isEqualTo(1);
      }
      Map<Long, Integer> expected = new TreeMap<>();
      for (long offset = LOG_START; offset < SENT; offset++) {
        expected.put(offset, 1);
      }
      assertThat(ledger.appliesPerOffset(0))
          .as("each record from the log start applied once, none before it")
          .isEqualTo(expected);
    } finally {
      commands.close();
    }
  }

  /**
   * The control: records deleted after the first fetch and before the retry, so the first one
   * fetched is gone when the runner rewinds to it. Those records were never applied, and the runner
   * must stop rather than skip them (which a rewind to "the beginning, wherever it is now" would).
   */
  @Test
  void recordsDeletedBeforeTheRetryOfTheFirstApplyStopTheRunnerInsteadOfBeingSkipped(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-moved"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    AtomicInteger failuresLeft = new AtomicInteger(1);
    RecordHandler<String, String> applied = ledger.handler();
    try {
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      try (PartitionOwner<String, String> owner =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "log-start-moved").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch);
                if (failuresLeft.getAndDecrement() > 0) {
                  deleteBefore(kafka, tp, LOG_START + 2);
                  throw new DataAccessException(
                      "could not serialize access", new SQLException("serialization", "40001"));
                }
              })) {
        owner.createTableIfMissing();
        owner.start();
        assertThat(owner.awaitTermination(Duration.ofSeconds(60)))
            .as("the runner stops on the records deleted before they were applied")
            .isTrue();
        assertThat(owner.failure()).get().isInstanceOf(OffsetOutOfRangeException.class);
      }
      assertThat(ledger.appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied())
          .as("the offset before the log start at the first claim: nothing applied")
          .isEqualTo(LOG_START - 1);
    } finally {
      commands.close();
    }
  }

  /**
   * The first owner claims the partition with nothing applied and stops on its first apply (rolled
   * back); retention then deletes the first two records before the next owner claims it. Those
   * records were never applied: the next owner must stop on them, not start from wherever the log
   * starts by then.
   */
  @Test
  void recordsDeletedBetweenTwoClaimsOfANeverAppliedPartitionStopTheNextOwner(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-claims"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    RecordHandler<String, String> applied = ledger.handler();
    try {
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      try (PartitionOwner<String, String> first =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "first").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch); // rolled back by the failure below
                throw new IllegalStateException("the first owner stops on its first apply");
              })) {
        first.createTableIfMissing();
        first.start();
        assertThat(first.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(first.failure()).get().isInstanceOf(IllegalStateException.class);
      }
      deleteBefore(kafka, tp, LOG_START + 2);
      try (PartitionOwner<String, String> next =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "next").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              applied)) {
        next.start();
        Awaitility.await("the next owner stopped, or applied through the last record")
            .atMost(Duration.ofSeconds(60))
            .until(
                () ->
                    !next.isRunning()
                        || OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied() == SENT - 1);
        assertThat(next.failure())
            .as(
                "records %d and %d, deleted before they were applied, stop the next owner"
                    + " instead of being skipped (applied: %s)",
                LOG_START, LOG_START + 1, ledger.appliesPerOffset(0))
            .get()
            .isInstanceOf(OffsetOutOfRangeException.class);
      }
      assertThat(ledger.appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
    } finally {
      commands.close();
    }
  }

  /**
   * A row at an epoch above 1 that says nothing applied (seeded by a migration, or set to -1 by an
   * operator to reprocess) on a log that starts at 4: the claim stops the runner with an exception
   * that names the partition and the statement that fixes the row, and rolls back (the epoch
   * stays), instead of seeking to 0 and failing with {@code OffsetOutOfRangeException} at every
   * restart.
   */
  @Test
  void aRowAboveEpochOneSayingNothingAppliedOnALogAboveZeroStopsWithTheSqlFix(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-seeded"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    try {
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      try (PartitionOwner<String, String> owner =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "seeded").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              ledger.handler())) {
        owner.createTableIfMissing();
        pg.dsl()
            .execute(
                "INSERT INTO "
                    + OwnershipConfig.DEFAULT_TABLE
                    + " (consumer_group, topic, partition, partition_count, epoch, owner,"
                    + " last_applied_offset) VALUES (?, ?, 0, 1, 5, 'migration', -1)",
                group,
                topic);
        owner.start();
        assertThat(owner.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(owner.failure())
            .get()
            .asInstanceOf(InstanceOfAssertFactories.THROWABLE)
            .as("the failure names the partition and the statement that fixes the row")
            .hasMessageContaining(tp.toString())
            .hasMessageContaining("SET last_applied_offset = " + (LOG_START - 1));
      }
      assertThat(ledger.appliesPerOffset(0)).isEmpty();
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0))
          .as("the refused claim rolled back")
          .isEqualTo(new OwnerRows.Row(5, "migration", -1));
    } finally {
      commands.close();
    }
  }

  /**
   * A row recorded by {@code start()} while the log started at 0 says -1 (seeded here at epoch 0,
   * never claimed); records are produced and the first four deleted before the first claim. That
   * claim must stop the runner ({@link LogStartMismatchException}), not take the log start it finds
   * and skip them.
   */
  @Test
  void recordsDeletedBeforeTheFirstClaimOfARowRecordedAtLogStartZeroStopTheRunner(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-first"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, "first").build(),
            new StringDeserializer(),
            new StringDeserializer(),
            ledger.handler())) {
      owner.createTableIfMissing();
      pg.dsl()
          .execute(
              "INSERT INTO "
                  + OwnershipConfig.DEFAULT_TABLE
                  + " (consumer_group, topic, partition, partition_count, epoch,"
                  + " last_applied_offset) VALUES (?, ?, 0, 1, 0, -1)",
              group,
              topic);
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      owner.start();
      Awaitility.await("the runner stopped, or the records after the log start applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> !owner.isRunning() || ledger.appliesPerOffset(0).size() == SENT - LOG_START);
      assertThat(owner.failure())
          .as("records deleted before the first claim of a row recorded at log start 0")
          .get()
          .isInstanceOf(LogStartMismatchException.class);
      assertThat(ledger.appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0))
          .as("the refused claim rolled back")
          .isEqualTo(new OwnerRows.Row(0, null, -1));
    } finally {
      commands.close();
    }
  }

  /**
   * The log start lookup at {@code start()} fails (a test hook throws what {@code beginningOffsets}
   * would, once); the log already starts at 4. No row may be recorded as -1 for it: the row is
   * recorded at the first claim, with the log start it then finds, and every record from there
   * applies once (a -1 row would read as "start at 0" and stop the runner on records deleted long
   * before).
   */
  @Test
  void aFailedLookupAtStartRecordsNoRowAndTheFirstClaimRecordsTheLogStart(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-unknown"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    AtomicInteger lookups = new AtomicInteger();
    Map<Integer, OwnerRows.Row> rowsAtSecondLookup = new java.util.concurrent.ConcurrentHashMap<>();
    RecordingEvents events =
        new RecordingEvents() {
          @Override
          public void beforeLogStartLookup(java.util.Set<Integer> partitions) {
            if (lookups.incrementAndGet() == 1) {
              throw new org.apache.kafka.common.KafkaException("test: no leader at start");
            }
            rowsAtSecondLookup.putAll(OwnerRows.read(pg.dsl(), group, topic));
          }
        };
    try {
      commands.send(SENT);
      deleteBefore(kafka, tp, LOG_START);
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "unknown").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              ledger.handler(),
              Safeguards.ALL,
              events)) {
        owner.createTableIfMissing();
        owner.start();
        Awaitility.await("the records from the log start applied, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> !owner.isRunning() || ledger.appliesPerOffset(0).size() == SENT - LOG_START);
        assertThat(owner.failure()).isEmpty();
      }
      assertThat(lookups.get()).as("the lookup at start failed, the claim's answered").isEqualTo(2);
      assertThat(rowsAtSecondLookup).as("no row recorded by the failed start lookup").isEmpty();
      Map<Long, Integer> expected = new TreeMap<>();
      for (long offset = LOG_START; offset < SENT; offset++) {
        expected.put(offset, 1);
      }
      assertThat(ledger.appliesPerOffset(0)).isEqualTo(expected);
    } finally {
      commands.close();
    }
  }

  /**
   * The first claim of a partition whose log is empty and starts at 0 records -1 (the offset before
   * 0); the owner closes before anything is produced. Records are then produced and the first three
   * deleted before any owner applied them: the next claim (epoch 2, the row still -1) must stop the
   * runner, not start at the log start and skip them. Applying the log start at every claim of a
   * row saying -1, rather than at the first claim only, fails this test.
   */
  @Test
  void recordsProducedAndDeletedAfterAFirstClaimOnAnEmptyLogStopTheNextClaim(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("log-start-empty"), 1);
    String group = "owners-" + topic;
    TopicPartition tp = new TopicPartition(topic, 0);
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 3);
    try {
      RecordingEvents firstEvents = new RecordingEvents();
      try (PartitionOwner<String, String> first =
          PartitionOwner.withSafeguards(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "first-empty").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              ledger.handler(),
              Safeguards.ALL,
              firstEvents)) {
        first.createTableIfMissing();
        first.start();
        assertThat(firstEvents.claimed.await(60, TimeUnit.SECONDS)).isTrue();
      }
      assertThat(firstEvents.claims).containsExactly(new RecordingEvents.Claimed(0, 1, -1));
      commands.send(5);
      deleteBefore(kafka, tp, 3);
      try (PartitionOwner<String, String> next =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "next-empty").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              ledger.handler())) {
        next.start();
        assertThat(next.awaitTermination(Duration.ofSeconds(60)))
            .as("the next owner stops on records 0 to 2, deleted before they were applied")
            .isTrue();
        assertThat(next.failure())
            .get()
            .asInstanceOf(InstanceOfAssertFactories.THROWABLE)
            .isInstanceOf(LogStartMismatchException.class)
            .hasMessageContaining("SET last_applied_offset = 2");
      }
      assertThat(ledger.appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied()).isEqualTo(-1);
    } finally {
      commands.close();
    }
  }

  private static void deleteBefore(KafkaBroker kafka, TopicPartition tp, long offset)
      throws Exception {
    kafka
        .admin()
        .deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
        .all()
        .get(30, TimeUnit.SECONDS);
    long start =
        kafka
            .admin()
            .listOffsets(Map.of(tp, OffsetSpec.earliest()))
            .partitionResult(tp)
            .get(30, TimeUnit.SECONDS)
            .offset();
    assertThat(start).as("the log start after deleteRecords").isEqualTo(offset);
  }
}
