package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.awaitility.Awaitility;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A runner fenced on a partition that is still assigned to it (a late claim by a member that has
 * since left the group moved the epoch on) steps aside, and must take the partition back: nobody
 * else in the group will. With the classic protocol the rebalance it asks for tells it; with {@code
 * group.protocol=consumer} a member cannot ask for one, so the runner re-claims once its loop has
 * run for a session timeout with the partition still assigned here, a pause not counted.
 *
 * <p>The runner's clock is manual and moved by the test. A record on the runner's other partition,
 * sent after a move and applied, proves a whole turn ran on the moved clock: the turn's claim
 * retries run after its poll and before its applies. So each re-claim, or its absence, is asserted
 * at a known clock, not waited for.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class SteppedAsideReclaimIT {

  private static final Duration STEP = Duration.ofSeconds(1);

  @Test
  void classicProtocolReclaimsAfterTheRebalanceItAsksForWithoutTheClockMoving(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    try (Fenced fenced = Fenced.start(kafka, pg, "classic")) {
      Awaitility.await("partition 0 claimed again after the rebalance the runner asked for")
          .atMost(Duration.ofSeconds(60))
          .until(() -> fenced.claimsOfP0().size() == 2);
      assertThat(fenced.clock.nanoTime()).as("the clock never moved").isEqualTo(fenced.fencedAt);
      fenced.assertReclaimedAndEveryRecordAppliedOnce();
    }
  }

  @Test
  void consumerProtocolReclaimsOnlyAfterASessionTimeoutOfRunningNotOfPause(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    try (Fenced fenced = Fenced.start(kafka, pg, "consumer")) {
      // A pause longer than the session timeout (the loop is silent across it): a zombie dropped
      // from the group has not heard so yet, and must not claim back.
      fenced.clock.advance(TestOwners.SESSION_TIMEOUT.plusNanos(1));
      fenced.applyOneOnP1();
      assertThat(fenced.claimsOfP0())
          .as("not claimed again after a pause of a session timeout")
          .hasSize(1);

      // Running from here: steps shorter than pollTimeout + safetyMargin, each with a turn.
      Duration ran = Duration.ZERO;
      while (ran.plus(STEP).compareTo(TestOwners.SESSION_TIMEOUT) < 0) {
        fenced.clock.advance(STEP);
        ran = ran.plus(STEP);
        fenced.applyOneOnP1();
      }
      Duration toJustBefore = TestOwners.SESSION_TIMEOUT.minus(ran).minusNanos(1);
      fenced.clock.advance(toJustBefore);
      fenced.applyOneOnP1();
      assertThat(fenced.claimsOfP0())
          .as("not claimed again after running for the session timeout less 1 ns")
          .hasSize(1);

      fenced.clock.advance(Duration.ofNanos(2));
      fenced.applyOneOnP1();
      assertThat(fenced.claimsOfP0())
          .as("claimed again once the loop has run for the session timeout")
          .hasSize(2);
      fenced.assertReclaimedAndEveryRecordAppliedOnce();
    }
  }

  /**
   * Under the consumer protocol, with every apply on the runner's other partition slower than
   * {@code pollTimeout + safetyMargin} (1.5 s: a handler that waits on a slow call) on the real
   * clock: the loop runs without a pause the whole time (its heartbeats go on, on the consumer's
   * own thread), so partition 0 is claimed again once a session timeout has passed. A record on
   * partition 1 sent after that and applied proves a turn ran after it. Meanwhile the partition
   * stepped aside is visible in the {@code partitions.stepped.aside} gauge.
   */
  @Test
  void consumerProtocolReclaimsWhileEveryApplyIsSlowerThanPollTimeoutPlusSafetyMargin(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (Fenced fenced = Fenced.start(kafka, pg, "consumer", LeaseClock.system(), metrics)) {
      long fencedAt = System.nanoTime();
      fenced.slowApplies.set(true);
      while (System.nanoTime() - fencedAt
          < TestOwners.SESSION_TIMEOUT.plus(Duration.ofSeconds(1)).toNanos()) {
        fenced.applyOneOnP1();
      }
      fenced.applyOneOnP1();
      assertThat(fenced.claimsOfP0())
          .as(
              "claimed again after a session timeout of running whose every apply took longer"
                  + " than pollTimeout + safetyMargin")
          .hasSize(2);
      fenced.slowApplies.set(false);
      assertThat(steppedAside(metrics)).as("no partition stepped aside any more").isZero();
      fenced.assertReclaimedAndEveryRecordAppliedOnce();
    }
  }

  private static double steppedAside(MeterRegistry metrics) {
    Gauge gauge = metrics.find("nolock.ownership.partitions.stepped.aside").gauge();
    assertThat(gauge).as("the stepped-aside gauge").isNotNull();
    return gauge.value();
  }

  /**
   * A runner with partition 0 applied through offset 2, then fenced there by a late claim written
   * to the table, and stepped aside at offset 3.
   */
  private static final class Fenced implements AutoCloseable {
    final PostgresSchema pg;
    final String topic;
    final String group;
    final AppliedLedger ledger;
    final ManualLeaseClock clock = new ManualLeaseClock();
    final AtomicBoolean slowApplies = new AtomicBoolean();
    final RecordingEvents events;
    final KafkaProducer<String, String> producer;
    final PartitionOwner<String, String> owner;
    OwnerTable.Claim late;
    long fencedAt;
    int sentOnP1;

    private Fenced(
        KafkaBroker kafka,
        PostgresSchema pg,
        String protocol,
        CountDownLatch aside,
        LeaseClock runnerClock,
        MeterRegistry metrics) {
      this.pg = pg;
      this.topic = kafka.createTopic(kafka.uniqueTopicName("stepped-aside-" + protocol), 2);
      this.group = "owners-" + topic;
      this.ledger = AppliedLedger.fresh(pg.dsl());
      this.events =
          new RecordingEvents() {
            @Override
            public void released(int partition, String why) {
              if (partition == 0 && why.equals("fenced")) {
                aside.countDown();
              }
            }
          };
      this.producer = producer(kafka);
      this.owner =
          PartitionOwner.withSafeguards(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "rightful-" + protocol)
                  .clock(runnerClock == null ? clock : runnerClock)
                  .metrics(metrics, "test")
                  .consumerProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol)
                  .build(),
              new StringDeserializer(),
              new StringDeserializer(),
              slowOnP1(ledger.handler(), slowApplies),
              Safeguards.ALL,
              events);
    }

    static Fenced start(KafkaBroker kafka, PostgresSchema pg, String protocol) throws Exception {
      return start(kafka, pg, protocol, null, new SimpleMeterRegistry());
    }

    /** {@code runnerClock} null: the runner runs on the manual {@link #clock}. */
    static Fenced start(
        KafkaBroker kafka,
        PostgresSchema pg,
        String protocol,
        LeaseClock runnerClock,
        MeterRegistry metrics)
        throws Exception {
      CountDownLatch aside = new CountDownLatch(1);
      Fenced f = new Fenced(kafka, pg, protocol, aside, runnerClock, metrics);
      f.owner.createTableIfMissing();
      f.owner.start();
      send(f.producer, f.topic, 0, 3);
      Awaitility.await("partition 0's first records applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, f.group, f.topic, 0) == 2);
      // A member that has left the group claims partition 0 late: a newer epoch, another owner.
      f.late =
          new OwnerTable(DSL.name(OwnershipConfig.DEFAULT_TABLE))
              .claim(pg.dsl(), f.group, f.topic, 0, 2, "late-claimer", Duration.ofSeconds(5), 0L);
      send(f.producer, f.topic, 0, 3);
      assertThat(aside.await(60, TimeUnit.SECONDS))
          .as("the runner's next apply on partition 0 was fenced and it stepped aside")
          .isTrue();
      assertThat(f.events.outcomes)
          .filteredOn(o -> o.outcome() == ApplyOutcome.FENCED)
          .extracting(RecordingEvents.Outcome::offset)
          .containsExactly(3L);
      f.fencedAt = f.clock.nanoTime();
      return f;
    }

    List<RecordingEvents.Claimed> claimsOfP0() {
      return events.claims.stream().filter(c -> c.partition() == 0).toList();
    }

    /** Sends a record to partition 1 and waits until it is applied: a turn ran after the send. */
    void applyOneOnP1() throws Exception {
      send(producer, topic, 1, 1);
      int expected = sentOnP1++;
      Awaitility.await("the record on partition 1 sent at the clock's current time is applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, group, topic, 1) == expected);
    }

    void assertReclaimedAndEveryRecordAppliedOnce() {
      assertThat(claimsOfP0())
          .extracting(RecordingEvents.Claimed::epoch)
          .containsExactly(late.epoch() - 1, late.epoch() + 1);
      Map<Integer, FencingToken> owned = owner.ownedPartitions();
      assertThat(owned).containsEntry(0, FencingToken.of(late.epoch() + 1));
      Awaitility.await("partition 0's records after the late claim applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> lastApplied(pg, group, topic, 0) == 5);
      assertThat(ledger.notAppliedOnce(0, 6)).as("each record of partition 0 once").isEmpty();
      assertThat(ledger.notAppliedOnce(1, sentOnP1)).isEmpty();
      assertThat(owner.failure().toJavaOptional()).isEmpty();
    }

    @Override
    public void close() {
      owner.close();
      producer.close();
    }
  }

  /** The handler, slow on partition 1 while {@code slow} is set: a call that takes 1.5 s. */
  private static RecordHandler<String, String> slowOnP1(
      RecordHandler<String, String> handler, AtomicBoolean slow) {
    return (record, tx, epoch) -> {
      if (record.partition() == 1 && slow.get()) {
        Thread.sleep(1_500); // the workload: a slow call inside the apply, not a synchronisation
      }
      handler.apply(record, tx, epoch);
    };
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
