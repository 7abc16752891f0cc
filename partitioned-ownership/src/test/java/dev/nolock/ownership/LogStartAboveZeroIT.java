package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.OffsetOutOfRangeException;
import org.apache.kafka.common.KafkaException;
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
    AtomicInteger failuresLeft = new AtomicInteger(1);
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (Partition p = Partition.create(kafka, pg, "log-start")) {
      RecordHandler<String, String> applied = p.ledger().handler();
      p.sendAndDeleteBefore(LOG_START);
      try (PartitionOwner<String, String> owner =
          p.owner(
              "log-start",
              config -> config.metrics(metrics, "test"),
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch); // rolled back by the failure below
                if (failuresLeft.getAndDecrement() > 0) {
                  throw serializationFailure();
                }
              })) {
        owner.createTableIfMissing();
        owner.start();
        p.awaitStoppedOrRowAtLastRecord(
            "every record from the log start applied, or the runner stopped", owner);
        assertThat(owner.failure().toJavaOptional())
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
      assertThat(p.ledger().appliesPerOffset(0))
          .as("each record from the log start applied once, none before it")
          .isEqualTo(oncePerOffsetFromTheLogStart());
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
    AtomicInteger failuresLeft = new AtomicInteger(1);
    try (Partition p = Partition.create(kafka, pg, "log-start-moved")) {
      RecordHandler<String, String> applied = p.ledger().handler();
      p.sendAndDeleteBefore(LOG_START);
      try (PartitionOwner<String, String> owner =
          p.owner(
              "log-start-moved",
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch);
                if (failuresLeft.getAndDecrement() > 0) {
                  p.deleteBefore(LOG_START + 2);
                  throw serializationFailure();
                }
              })) {
        owner.createTableIfMissing();
        owner.start();
        assertThat(owner.awaitTermination(Duration.ofSeconds(60)))
            .as("the runner stops on the records deleted before they were applied")
            .isTrue();
        assertThat(owner.failure().toJavaOptional())
            .get()
            .isInstanceOf(OffsetOutOfRangeException.class);
      }
      assertThat(p.ledger().appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(p.row().lastApplied())
          .as("the offset before the log start at the first claim: nothing applied")
          .isEqualTo(LOG_START - 1);
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
    try (Partition p = Partition.create(kafka, pg, "log-start-claims")) {
      RecordHandler<String, String> applied = p.ledger().handler();
      p.sendAndDeleteBefore(LOG_START);
      try (PartitionOwner<String, String> first =
          p.owner(
              "first",
              (record, tx, epoch) -> {
                applied.apply(record, tx, epoch); // rolled back by the failure below
                throw new IllegalStateException("the first owner stops on its first apply");
              })) {
        first.createTableIfMissing();
        first.start();
        assertThat(first.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(first.failure().toJavaOptional())
            .get()
            .isInstanceOf(IllegalStateException.class);
      }
      p.deleteBefore(LOG_START + 2);
      try (PartitionOwner<String, String> next = p.owner("next", applied)) {
        next.start();
        p.awaitStoppedOrRowAtLastRecord(
            "the next owner stopped, or applied through the last record", next);
        assertThat(next.failure().toJavaOptional())
            .as(
                "records %d and %d, deleted before they were applied, stop the next owner"
                    + " instead of being skipped (applied: %s)",
                LOG_START, LOG_START + 1, p.ledger().appliesPerOffset(0))
            .get()
            .isInstanceOf(OffsetOutOfRangeException.class);
      }
      assertThat(p.ledger().appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
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
    try (Partition p = Partition.create(kafka, pg, "log-start-seeded")) {
      p.sendAndDeleteBefore(LOG_START);
      try (PartitionOwner<String, String> owner = p.owner("seeded", p.ledger().handler())) {
        owner.createTableIfMissing();
        pg.dsl()
            .execute(
                "INSERT INTO "
                    + OwnershipConfig.DEFAULT_TABLE
                    + " (consumer_group, topic, partition, partition_count, epoch, owner,"
                    + " last_applied_offset) VALUES (?, ?, 0, 1, 5, 'migration', -1)",
                p.group(),
                p.topic());
        owner.start();
        assertThat(owner.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(owner.failure().toJavaOptional())
            .get()
            .asInstanceOf(InstanceOfAssertFactories.THROWABLE)
            .as("the failure names the partition and the statement that fixes the row")
            .hasMessageContaining(p.tp().toString())
            .hasMessageContaining("SET last_applied_offset = " + (LOG_START - 1));
      }
      assertThat(p.ledger().appliesPerOffset(0)).isEmpty();
      assertThat(p.row())
          .as("the refused claim rolled back")
          .isEqualTo(new OwnerRows.Row(5, "migration", -1));
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
    try (Partition p = Partition.create(kafka, pg, "log-start-first");
        PartitionOwner<String, String> owner = p.owner("first", p.ledger().handler())) {
      owner.createTableIfMissing();
      pg.dsl()
          .execute(
              "INSERT INTO "
                  + OwnershipConfig.DEFAULT_TABLE
                  + " (consumer_group, topic, partition, partition_count, epoch,"
                  + " last_applied_offset) VALUES (?, ?, 0, 1, 0, -1)",
              p.group(),
              p.topic());
      p.sendAndDeleteBefore(LOG_START);
      owner.start();
      p.awaitStoppedOrAppliedFromTheLogStart(
          "the runner stopped, or the records after the log start applied", owner);
      assertThat(owner.failure().toJavaOptional())
          .as("records deleted before the first claim of a row recorded at log start 0")
          .get()
          .isInstanceOf(LogStartMismatchException.class);
      assertThat(p.ledger().appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(p.row())
          .as("the refused claim rolled back")
          .isEqualTo(new OwnerRows.Row(0, null, -1));
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
    AtomicInteger lookups = new AtomicInteger();
    Map<Integer, OwnerRows.Row> rowsAtSecondLookup = new ConcurrentHashMap<>();
    try (Partition p = Partition.create(kafka, pg, "log-start-unknown")) {
      RecordingEvents events =
          new RecordingEvents() {
            @Override
            public void beforeLogStartLookup(Set<Integer> partitions) {
              if (lookups.incrementAndGet() == 1) {
                throw new KafkaException("test: no leader at start");
              }
              rowsAtSecondLookup.putAll(p.rows());
            }
          };
      p.sendAndDeleteBefore(LOG_START);
      try (PartitionOwner<String, String> owner =
          p.owner("unknown", p.ledger().handler(), events)) {
        owner.createTableIfMissing();
        owner.start();
        p.awaitStoppedOrAppliedFromTheLogStart(
            "the records from the log start applied, or the runner stopped", owner);
        assertThat(owner.failure().toJavaOptional()).isEmpty();
      }
      assertThat(lookups.get()).as("the lookup at start failed, the claim's answered").isEqualTo(2);
      assertThat(rowsAtSecondLookup).as("no row recorded by the failed start lookup").isEmpty();
      assertThat(p.ledger().appliesPerOffset(0)).isEqualTo(oncePerOffsetFromTheLogStart());
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
    try (Partition p = Partition.create(kafka, pg, "log-start-empty")) {
      RecordingEvents firstEvents = new RecordingEvents();
      try (PartitionOwner<String, String> first =
          p.owner("first-empty", p.ledger().handler(), firstEvents)) {
        first.createTableIfMissing();
        first.start();
        assertThat(firstEvents.claimed.await(60, TimeUnit.SECONDS)).isTrue();
      }
      assertThat(firstEvents.claims).containsExactly(new RecordingEvents.Claimed(0, 1, -1));
      p.commands().send(5);
      p.deleteBefore(3);
      try (PartitionOwner<String, String> next = p.owner("next-empty", p.ledger().handler())) {
        next.start();
        assertThat(next.awaitTermination(Duration.ofSeconds(60)))
            .as("the next owner stops on records 0 to 2, deleted before they were applied")
            .isTrue();
        assertThat(next.failure().toJavaOptional())
            .get()
            .asInstanceOf(InstanceOfAssertFactories.THROWABLE)
            .isInstanceOf(LogStartMismatchException.class)
            .hasMessageContaining("SET last_applied_offset = 2");
      }
      assertThat(p.ledger().appliesPerOffset(0)).as("nothing applied, nothing skipped").isEmpty();
      assertThat(p.row().lastApplied()).isEqualTo(-1);
    }
  }

  /** What a serialization conflict throws: a transient failure, retried. */
  private static DataAccessException serializationFailure() {
    return new DataAccessException(
        "could not serialize access", new SQLException("serialization", "40001"));
  }

  /** One apply of each offset from {@code LOG_START} to the last record sent. */
  private static Map<Long, Integer> oncePerOffsetFromTheLogStart() {
    Map<Long, Integer> expected = new TreeMap<>();
    for (long offset = LOG_START; offset < SENT; offset++) {
      expected.put(offset, 1);
    }
    return expected;
  }

  /**
   * One test's partition: a new one-partition topic, its group, a fresh ledger of applies and the
   * producer of its records (closed with the partition), and the owners of that group.
   */
  private record Partition(
      KafkaBroker kafka,
      PostgresSchema pg,
      String topic,
      String group,
      TopicPartition tp,
      AppliedLedger ledger,
      Commands commands)
      implements AutoCloseable {

    static Partition create(KafkaBroker kafka, PostgresSchema pg, String topicPrefix) {
      String topic = kafka.createTopic(kafka.uniqueTopicName(topicPrefix), 1);
      return new Partition(
          kafka,
          pg,
          topic,
          "owners-" + topic,
          new TopicPartition(topic, 0),
          AppliedLedger.fresh(pg.dsl()),
          new Commands(kafka.bootstrapServers(), topic, 1, 3));
    }

    PartitionOwner<String, String> owner(String ownerId, RecordHandler<String, String> handler) {
      return owner(ownerId, config -> {}, handler);
    }

    PartitionOwner<String, String> owner(
        String ownerId,
        Consumer<OwnershipConfig.Builder> tweak,
        RecordHandler<String, String> handler) {
      return PartitionOwner.create(
          pg.dataSource(),
          config(ownerId, tweak),
          new StringDeserializer(),
          new StringDeserializer(),
          handler);
    }

    /** An owner with every safeguard on that reports to {@code events}. */
    PartitionOwner<String, String> owner(
        String ownerId, RecordHandler<String, String> handler, OwnerEvents events) {
      return PartitionOwner.withSafeguards(
          pg.dataSource(),
          config(ownerId, config -> {}),
          new StringDeserializer(),
          new StringDeserializer(),
          handler,
          Safeguards.ALL,
          events);
    }

    private OwnershipConfig config(String ownerId, Consumer<OwnershipConfig.Builder> tweak) {
      OwnershipConfig.Builder config =
          TestOwners.config(kafka.bootstrapServers(), topic, group, ownerId);
      tweak.accept(config);
      return config.build();
    }

    /** Sends {@code SENT} records, then deletes those before {@code logStart}. */
    void sendAndDeleteBefore(long logStart) throws Exception {
      commands.send(SENT);
      deleteBefore(logStart);
    }

    /** Deletes the records before {@code offset}, as retention does, and checks the log start. */
    void deleteBefore(long offset) throws Exception {
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

    Map<Integer, OwnerRows.Row> rows() {
      return OwnerRows.read(pg.dsl(), group, topic);
    }

    /** The ownership row of partition 0. */
    OwnerRows.Row row() {
      return rows().get(0);
    }

    /** Waits until {@code owner} stopped, or its row says the last record sent was applied. */
    void awaitStoppedOrRowAtLastRecord(String alias, PartitionOwner<?, ?> owner) {
      awaitStoppedOr(alias, owner, () -> row().lastApplied() == SENT - 1);
    }

    /** Waits until {@code owner} stopped, or the ledger holds as many records as the log. */
    void awaitStoppedOrAppliedFromTheLogStart(String alias, PartitionOwner<?, ?> owner) {
      awaitStoppedOr(alias, owner, () -> ledger.appliesPerOffset(0).size() == SENT - LOG_START);
    }

    private static void awaitStoppedOr(
        String alias, PartitionOwner<?, ?> owner, BooleanSupplier done) {
      Awaitility.await(alias)
          .atMost(Duration.ofSeconds(60))
          .until(() -> !owner.isRunning() || done.getAsBoolean());
    }

    @Override
    public void close() {
      commands.close();
    }
  }
}
