package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A replay after a rebalance is a no-op. The second owner is made to replay: on its claim it reads
 * from offset 0 instead of the table's last applied offset + 1 (a test hook; as a runner that
 * trusted a lagging Kafka commit would). Every replayed record is skipped by the offset check; the
 * bank shows each command once.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ReplayAfterRebalanceIT {

  @Test
  void recordsReplayedAfterARebalanceAreSkippedAndNewOnesApplyOnce(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("replay"), 2);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 2, 20);
    SimpleMeterRegistry firstMetrics = new SimpleMeterRegistry();
    SimpleMeterRegistry secondMetrics = new SimpleMeterRegistry();
    Map<Integer, Long> lastAppliedAtClaim = new ConcurrentHashMap<>();
    AtomicLong replays = new AtomicLong();
    OwnerEvents replayFromStart =
        new OwnerEvents() {
          @Override
          public void claimed(int partition, long epoch, long lastApplied) {
            lastAppliedAtClaim.put(partition, lastApplied);
          }

          @Override
          public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
            if (outcome == ApplyOutcome.REPLAY) {
              replays.incrementAndGet();
            }
          }

          @Override
          public long startOffset(int partition, long lastApplied) {
            return 0;
          }
        };

    try (PartitionOwner<String, String> first =
            PartitionOwner.create(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "first")
                    .metrics(firstMetrics, "test")
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                Bank.handler("first"));
        PartitionOwner<String, String> second =
            PartitionOwner.withSafeguards(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "second")
                    .metrics(secondMetrics, "test")
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                Bank.handler("second"),
                Safeguards.ALL,
                replayFromStart)) {
      first.createTableIfMissing();
      first.start();
      Awaitility.await("the first owner holds both partitions")
          .atMost(Duration.ofSeconds(60))
          .until(() -> first.ownedPartitions().size() == 2);
      commands.send(200);
      Awaitility.await("200 commands applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 200);

      second.start();
      Awaitility.await("the rebalance gives the second owner a partition")
          .atMost(Duration.ofSeconds(60))
          .until(() -> second.ownedPartitions().size() == 1 && first.ownedPartitions().size() == 1);
      long toReplay = lastAppliedAtClaim.values().stream().mapToLong(l -> l + 1).sum();
      assertThat(toReplay).as("records already applied on the moved partition").isPositive();
      Awaitility.await("the second owner has replayed its partition from offset 0")
          .atMost(Duration.ofSeconds(60))
          .until(() -> replays.get() == toReplay);

      commands.send(100);
      Awaitility.await("300 commands applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 300);

      assertThat(counter(secondMetrics, "nolock.ownership.replays.skipped")).isEqualTo(toReplay);
      assertThat(counter(firstMetrics, "nolock.ownership.replays.skipped")).isZero();
      assertThat(
              counter(firstMetrics, "nolock.ownership.records.applied")
                  + counter(secondMetrics, "nolock.ownership.records.applied"))
          .as("each command applied once, by one of the two")
          .isEqualTo(300);
      assertThat(counter(secondMetrics, "nolock.ownership.fenced.writes")).isZero();
      assertThat(
              firstMetrics
                  .get("nolock.ownership.rebalances")
                  .tag("event", "revoked")
                  .counter()
                  .count())
          .isGreaterThanOrEqualTo(1);
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).isEqualTo(300);
    } finally {
      commands.close();
    }
  }

  private static double counter(SimpleMeterRegistry registry, String name) {
    return registry.get(name).counters().stream().mapToDouble(c -> c.count()).sum();
  }
}
