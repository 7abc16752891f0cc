package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jooq.Record;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Two owners of a 6-partition topic; one, a child JVM, is frozen with SIGSTOP inside an apply
 * transaction, holding its partition's row lock, past the session timeout. The other owner (in this
 * JVM) is assigned the frozen owner's partitions; its claim of the locked one waits {@code
 * queryTimeout} and fails with a statement timeout, in the rebalance callback and then at every
 * retry until PostgreSQL ends the frozen session ({@code transactionIdleTimeout} does after a
 * while; here the test ends it with {@code pg_terminate_backend} once the retries it needs have
 * failed, so the timing of the rebalance cannot make them not happen). Each failure starts a
 * backoff that pauses every partition, in turns whose poll has returned records of the partitions
 * the survivor owned the whole time.
 *
 * <p>Steps:
 *
 * <ol>
 *   <li>start the child, then the survivor; wait until each owns 3 partitions;
 *   <li>send commands over all keys and wait until they are applied; arm the child's gate and send
 *       one command to one of its partitions: the child stops inside that command's handler (after
 *       the apply's ownership update took the row lock) and is frozen there with SIGSTOP;
 *   <li>once the survivor's claim of the locked partition has failed, send more commands, to the
 *       survivor's own partitions only (the claimed ones stay empty, so whatever is in hand is
 *       theirs), so that the survivor has records of them in hand at each failed retry (counted
 *       through {@link PolledRecords}: the offsets the last poll returned that were not applied
 *       yet); wait for 3 such retries, and see in {@code pg_stat_activity} a claim blocked by the
 *       frozen owner's backend;
 *   <li>end the frozen session; wait until the survivor owns the locked partition; resume the child
 *       (its apply fails; its retry with the old epoch is refused, or its next poll tells it that
 *       it lost its partitions; it rejoins the group); send more commands, so that every partition
 *       has records after any run a turn may have dropped; wait until every partition's position
 *       covers every command; close both;
 *   <li>judge the bank, whose ledger has no unique key on (key, sequence number): every command
 *       applied exactly once, in per-key order.
 * </ol>
 *
 * <p>The scenario is asserted to have happened (claim retries failed with records in hand), so the
 * test cannot pass because the lock was never met. Negative control: with the loop as it was before
 * it rewound after a backoff started in the turn, this test fails: runs of consecutive offsets on
 * the survivor's own partitions (69, 122 and 109 in one run) are never applied while the later ones
 * are, and the ownership table says every offset was applied.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class FrozenOwnerHoldingRowLockIT {

  private static final int PARTITIONS = 6;
  private static final int KEYS = 120;
  private static final int BEFORE_FREEZE = 800;
  private static final int DURING_FREEZE = 600;
  private static final int AFTER_CLAIM = 600;

  /** The survivor's claim waits this long on the row lock, then fails (57014). */
  private static final Duration QUERY_TIMEOUT = Duration.ofMillis(500);

  @Test
  void aClaimBlockedByAFrozenOwnersRowLockLosesNoCommandOfTheOtherOwnersPartitions(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    long started = System.nanoTime();
    String topic = kafka.createTopic(kafka.uniqueTopicName("frozen-row-lock"), PARTITIONS);
    String group = "owners-" + topic;
    String suffix = UUID.randomUUID().toString().substring(0, 6);
    String survivorId = "survivor-" + suffix;
    String frozenId = "frozen-" + suffix;
    String survivorClientId = "owner-" + survivorId; // TestOwners' client.id

    ClaimFailures failures = new ClaimFailures(survivorClientId);
    Commands commands = new Commands(kafka.bootstrapServers(), topic, PARTITIONS, KEYS);
    PartitionOwner<String, String> survivor =
        PartitionOwner.withSafeguards(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, survivorId)
                .queryTimeout(QUERY_TIMEOUT)
                .consumerProperty(
                    ConsumerConfig.INTERCEPTOR_CLASSES_CONFIG, PolledRecords.class.getName())
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            Bank.handler(survivorId),
            Safeguards.ALL,
            failures);
    failures.owner = survivor;
    ChildJvm frozen = null;
    try {
      survivor.createTableIfMissing();
      Bank.freshTables(pg.dsl());

      // 1. Two owners, 3 partitions each.
      frozen =
          ChildJvm.start(
              "frozen",
              OwnerChildMain.class,
              kafka.bootstrapServers(),
              topic,
              group,
              pg.jdbcUrl(),
              frozenId,
              "ALL",
              "0",
              "IN_HANDLER");
      frozen.awaitLine("STARTED", Duration.ofSeconds(60));
      survivor.start();
      await("each owner holds 3 of the 6 partitions")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                Map<String, Long> perOwner =
                    OwnerRows.read(pg.dsl(), group, topic).values().stream()
                        .filter(r -> r.owner() != null)
                        .collect(
                            Collectors.groupingBy(OwnerRows.Row::owner, Collectors.counting()));
                return perOwner.equals(Map.of(survivorId, 3L, frozenId, 3L))
                    && survivor.ownedPartitions().size() == 3;
              });
      Set<Integer> survivorsOwn = Set.copyOf(survivor.ownedPartitions().keySet());
      failures.survivorsOwn = survivorsOwn;

      // 2. Commands, all applied; the child freezes inside the apply of one more, holding its row
      // lock, with nothing else left to apply on its partitions.
      commands.send(BEFORE_FREEZE);
      await("all " + BEFORE_FREEZE + " commands applied")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == BEFORE_FREEZE);
      frozen.arm(Duration.ofSeconds(10));
      int frozensPartition =
          IntStream.range(0, PARTITIONS)
              .filter(p -> !survivorsOwn.contains(p))
              .findFirst()
              .orElseThrow();
      commands.sendTo(Set.of(frozensPartition), 1);
      long frozenBackend = Long.parseLong(frozen.awaitLine("BACKEND", Duration.ofSeconds(60))[1]);
      String[] gate = frozen.awaitLine("GATE", Duration.ofSeconds(10));
      frozen.signal("STOP");
      frozen.awaitState('T');
      int lockedPartition = Integer.parseInt(gate[1]);
      long frozenEpoch = Long.parseLong(gate[3]);
      failures.lockedPartition = lockedPartition;

      // 3. The survivor's claim of the locked partition fails; records keep coming meanwhile.
      await("the survivor's claim of partition " + lockedPartition + " failed")
          .atMost(Duration.ofSeconds(30))
          .until(() -> failures.claimFailures.get() > 0 || !survivor.isRunning());
      assertThat(survivor.isRunning()).as("the survivor runs").isTrue();
      commands.sendTo(survivorsOwn, DURING_FREEZE);
      await("3 claim retries failed with records of the survivor's own partitions in hand")
          .atMost(Duration.ofSeconds(30))
          .until(() -> failures.retriesWithRecordsInHand.get() >= 3 || !survivor.isRunning());
      await("a claim waits on the frozen owner's row lock (seen in PostgreSQL)")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(50))
          .until(
              () ->
                  pg.dsl()
                          .fetchOne(
                              "SELECT count(*) FROM pg_stat_activity"
                                  + " WHERE ? = ANY (pg_blocking_pids(pid))"
                                  + " AND query LIKE '%"
                                  + OwnershipConfig.DEFAULT_TABLE
                                  + "%'",
                              (int) frozenBackend)
                          .get(0, Long.class)
                      > 0);

      // 4. PostgreSQL ends the frozen session (as transactionIdleTimeout would), the claim
      // succeeds; the child is resumed.
      assertThat(pg.dsl().fetchValue("SELECT pg_terminate_backend(?)", (int) frozenBackend))
          .as("the frozen owner's session was ended")
          .isEqualTo(true);
      await("the survivor claims partition " + lockedPartition)
          .atMost(Duration.ofSeconds(30))
          .until(
              () ->
                  survivor.ownedPartitions().containsKey(lockedPartition) || !survivor.isRunning());
      assertThat(survivor.ownedPartitions().get(lockedPartition).value())
          .as("the survivor's epoch on the locked partition")
          .isGreaterThan(frozenEpoch);
      assertThat(frozen.isAlive()).as("the child was frozen until now").isTrue();
      frozen.go();
      frozen.signal("CONT");
      // Later commands on every partition: a run skipped before them would leave the positions
      // where applying every command would.
      commands.send(AFTER_CLAIM);
      int total = commands.total();
      await("every partition's position covers all " + total + " commands")
          .atMost(Duration.ofSeconds(60))
          .pollInterval(Duration.ofMillis(250))
          .until(
              () ->
                  OwnerRows.appliedThrough(pg.dsl(), group, topic) == total
                      || !survivor.isRunning());
      survivor.close();
      assertThat(survivor.failure().toJavaOptional()).as("the survivor stopped cleanly").isEmpty();
      frozen.stop();
      frozen.awaitLine("CLOSED", Duration.ofSeconds(60));
      assertThat(frozen.awaitExit(Duration.ofSeconds(30))).as("the child's exit code").isZero();

      // 5. Judge.
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      Map<Integer, String> gaps = gaps(pg, topic, commands.sent());
      System.out.printf(
          "Frozen owner holding its row lock: %d commands over %d keys in %.1f s; child frozen"
              + " inside the apply of partition %s offset %s; the survivor (owning %s) backed off"
              + " after %d failed claims, %d of them retries with %d records of its own partitions"
              + " in hand; %s%n",
          total,
          KEYS,
          (System.nanoTime() - started) / 1e9,
          gate[1],
          gate[2],
          survivorsOwn,
          failures.claimFailures.get(),
          failures.retriesWithRecordsInHand.get(),
          failures.recordsInHand.get(),
          report);

      assertThat(failures.retriesWithRecordsInHand.get())
          .as(
              "retries of the claim blocked by the frozen owner's row lock failed while records"
                  + " of the survivor's own partitions were in hand (the scenario happened)")
          .isPositive();
      assertThat(gaps)
          .as(
              "offsets never applied, per partition (the survivor owned %s the whole time), while"
                  + " the ownership table says every offset was applied",
              survivorsOwn)
          .isEmpty();
      assertThat(report.wrongCounters())
          .as("every key's counter equals the commands sent for it (key -> applied - sent)")
          .isEmpty();
      assertThat(report.duplicates()).as("no command applied twice").isEmpty();
      assertThat(report.outOfOrder()).as("per-key order in the ledger").isEmpty();
      assertThat(report.notInOrderFlags()).as("per-key sequence checks at apply time").isZero();
      assertThat(report.ledgerRows()).isEqualTo(total);
    } finally {
      survivor.close();
      commands.close();
      if (frozen != null) {
        frozen.close();
      }
    }
  }

  /**
   * Per partition, the offsets below the partition's command count with no ledger row, as runs
   * {@code first..last}. Offsets are contiguous from 0 (idempotent, non-transactional producer).
   */
  private static Map<Integer, String> gaps(
      PostgresSchema pg, String topic, Map<String, Integer> sent) {
    KeyRouter<String> router = KeyRouter.create(topic, PARTITIONS, new StringSerializer());
    Map<Integer, Integer> perPartition = new HashMap<>();
    sent.forEach((key, n) -> perPartition.merge(router.partitionOf(key), n, Integer::sum));
    Map<Integer, Set<Long>> applied = new HashMap<>();
    for (Record r : pg.dsl().fetch("SELECT kafka_partition, kafka_offset FROM bank_ledger")) {
      applied
          .computeIfAbsent(r.get(0, Integer.class), p -> new TreeSet<>())
          .add(r.get(1, Long.class));
    }
    Map<Integer, String> gaps = new TreeMap<>();
    perPartition.forEach(
        (partition, count) -> {
          Set<Long> offsets = applied.getOrDefault(partition, Set.of());
          StringBuilder runs = new StringBuilder();
          long missing = 0;
          long runStart = -1;
          for (long offset = 0; offset <= count; offset++) {
            boolean absent = offset < count && !offsets.contains(offset);
            if (absent) {
              missing++;
              if (runStart < 0) {
                runStart = offset;
              }
            } else if (runStart >= 0) {
              runs.append(runs.isEmpty() ? "" : ", ")
                  .append(runStart)
                  .append("..")
                  .append(offset - 1)
                  .append(" (")
                  .append(offset - runStart)
                  .append(")");
              runStart = -1;
            }
          }
          if (missing > 0) {
            gaps.put(partition, missing + " of " + count + ": " + runs);
          }
        });
    return gaps;
  }

  /**
   * The survivor's observer: counts the backoffs a failed claim started, and those that came from
   * the retry of a claim (after the poll) while the poll had returned records not applied yet of
   * the partitions the survivor owned before the freeze. Runs on the loop thread.
   */
  private static final class ClaimFailures extends RecordingEvents {
    final String clientId;
    final AtomicInteger claimFailures = new AtomicInteger();
    final AtomicInteger retriesWithRecordsInHand = new AtomicInteger();
    final AtomicLong recordsInHand = new AtomicLong();
    final Map<Integer, Long> appliedThrough = new ConcurrentHashMap<>();
    volatile PartitionOwner<String, String> owner;
    volatile int lockedPartition = -1;
    volatile Set<Integer> survivorsOwn = Set.of();

    ClaimFailures(String clientId) {
      this.clientId = clientId;
    }

    @Override
    public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
      if (outcome != ApplyOutcome.FENCED) {
        appliedThrough.merge(partition, offset, Math::max);
      }
      super.outcome(partition, offset, epoch, outcome);
    }

    @Override
    public void backingOff(int failuresInARow, Duration delay, OwnerEvents.BackoffCause cause) {
      Map<Integer, PolledRecords.Range> batch = PolledRecords.take(clientId);
      if (cause != OwnerEvents.BackoffCause.APPLY
          && lockedPartition >= 0
          && !owner.ownedPartitions().containsKey(lockedPartition)) {
        claimFailures.incrementAndGet();
        long inHand = 0;
        for (Map.Entry<Integer, PolledRecords.Range> e : batch.entrySet()) {
          if (survivorsOwn.contains(e.getKey())) {
            long from =
                Math.max(e.getValue().first(), appliedThrough.getOrDefault(e.getKey(), -1L) + 1);
            inHand += Math.max(0, e.getValue().last() - from + 1);
          }
        }
        if (cause == OwnerEvents.BackoffCause.CLAIM_RETRY && inHand > 0) {
          retriesWithRecordsInHand.incrementAndGet();
          recordsInHand.addAndGet(inHand);
        }
      }
      super.backingOff(failuresInARow, delay, cause);
    }
  }
}
