package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A runner fenced on a partition that is still assigned to it (a late claim by a member that has
 * since left the group moved the epoch on) steps aside, and must take the partition back: nobody
 * else in the group will. With the classic protocol a rebalance it asks for tells it; with {@code
 * group.protocol=consumer} a member cannot ask for one, so the runner re-claims once a session
 * timeout has passed with the partition still assigned here.
 *
 * <p>The runner's clock is manual and moved past the session timeout by the test. A record on the
 * runner's other partition, sent after that and applied, proves a whole turn ran on the moved
 * clock: the turn's claim retries run after its poll and before its applies. So the re-claim is
 * asserted, not waited for.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class SteppedAsideReclaimIT {

  @ParameterizedTest(name = "group.protocol={0}")
  @ValueSource(strings = {"classic", "consumer"})
  void aPartitionThatSteppedAsideWhileStillAssignedIsClaimedAgain(
      String protocol, KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("stepped-aside-" + protocol), 2);
    String group = "owners-" + topic;
    AppliedLedger ledger = AppliedLedger.fresh(pg.dsl());
    ManualLeaseClock clock = new ManualLeaseClock();
    CountDownLatch steppedAside = new CountDownLatch(1);
    RecordingEvents events =
        new RecordingEvents() {
          @Override
          public void released(int partition, String why) {
            if (partition == 0 && why.equals("fenced")) {
              steppedAside.countDown();
            }
          }
        };
    try (KafkaProducer<String, String> producer = producer(kafka);
        PartitionOwner<String, String> owner =
            PartitionOwner.withSafeguards(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "rightful-" + protocol)
                    .clock(clock)
                    .consumerProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol)
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                ledger.handler(),
                Safeguards.ALL,
                events)) {
      owner.createTableIfMissing();
      owner.start();
      send(producer, topic, 0, 3);
      Awaitility.await("partition 0's first records applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, group, topic, 0) == 2);

      // A member that has left the group claims partition 0 late: a newer epoch, another owner.
      OwnerTable.Claim late =
          new OwnerTable(DSL.name(OwnershipConfig.DEFAULT_TABLE))
              .claim(pg.dsl(), group, topic, 0, 2, "late-claimer", Duration.ofSeconds(5), () -> 0L);
      send(producer, topic, 0, 3);
      assertThat(steppedAside.await(60, TimeUnit.SECONDS))
          .as("the runner's next apply on partition 0 was fenced and it stepped aside")
          .isTrue();
      assertThat(events.outcomes)
          .filteredOn(o -> o.outcome() == ApplyOutcome.FENCED)
          .extracting(RecordingEvents.Outcome::offset)
          .containsExactly(3L);

      clock.advance(TestOwners.SESSION_TIMEOUT.plusNanos(1));
      send(producer, topic, 1, 1);
      Awaitility.await("the record on partition 1 sent after the clock moved is applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, group, topic, 1) == 0);

      assertThat(events.claims)
          .as("partition 0, fenced while still assigned here, is claimed again")
          .filteredOn(c -> c.partition() == 0)
          .extracting(RecordingEvents.Claimed::epoch)
          .containsExactly(late.epoch() - 1, late.epoch() + 1);
      Map<Integer, FencingToken> owned = owner.ownedPartitions();
      assertThat(owned).containsEntry(0, FencingToken.of(late.epoch() + 1));
      Awaitility.await("partition 0's records after the late claim applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, group, topic, 0) == 5);
      assertThat(ledger.notAppliedOnce(0, 6)).as("each record of partition 0 once").isEmpty();
      assertThat(ledger.notAppliedOnce(1, 1)).isEmpty();
      assertThat(owner.failure()).isEmpty();
    }
  }

  /** The partition's last applied offset; -1 also before the runner has written its rows. */
  private static long lastApplied(PostgresSchema pg, String group, String topic, int partition) {
    OwnerRows.Row row = OwnerRows.read(pg.dsl(), group, topic).get(partition);
    return row == null ? -1 : row.lastApplied();
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
