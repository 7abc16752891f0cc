package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The runner after a {@code COMMIT} was lost, through testkit's {@link JdbcFaults} under the
 * runner's pool. An apply's: with {@link FaultKind#ANSWER_LOST} the apply committed on the server
 * and the runner heard a dropped connection; with {@link FaultKind#REQUEST_LOST} it rolled back.
 * Either way the record's change commits exactly once: when the runner retries it (a replay if it
 * had committed), and when the partition is handed to the next owner before any retry (which starts
 * after it if it had committed, at it if not, whatever Kafka's committed offset says). The bank's
 * ledger has no unique key, so a second apply would show as a second row. A claim's, its answer
 * lost: the runner claims again, and the epoch it applies with is the retry's.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class LostCommitIT {

  @ParameterizedTest
  @EnumSource(FaultKind.class)
  void anApplyWhoseCommitWasLostIsRetriedByTheRunnerAndCommitsOnce(
      FaultKind kind, KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("lost-commit"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 1);
    RecordingEvents events = new RecordingEvents();
    try (JdbcFaults faults = JdbcFaults.pool(pg.jdbcUrl());
        PartitionOwner<String, String> owner =
            PartitionOwner.withSafeguards(
                faults.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "retrying").build(),
                new StringDeserializer(),
                new StringDeserializer(),
                Bank.handler("retrying"),
                Safeguards.ALL,
                events)) {
      owner.createTableIfMissing();
      owner.start();
      assertThat(events.claimed.await(60, TimeUnit.SECONDS)).as("partition 0 claimed").isTrue();

      // The claim has committed; the runner's next COMMIT is the first record's apply.
      InjectedFault fault = faults.onNextCommit(kind);
      commands.send(1);
      await("the record's apply ends, or the runner stops")
          .atMost(Duration.ofSeconds(60))
          .until(() -> !events.outcomes.isEmpty() || !owner.isRunning());

      fault.assertFired();
      assertThat(owner.failure().toJavaOptional()).as("%s: the runner goes on", kind).isEmpty();
      assertThat(events.backoffs).as("%s: one backend failure, then a retry", kind).hasSize(1);
      assertThat(events.outcomes)
          .extracting(RecordingEvents.Outcome::outcome)
          .as(
              "%s: the retry of the record is %s",
              kind,
              kind == FaultKind.ANSWER_LOST
                  ? "a replay of the apply that committed"
                  : "its first apply")
          .containsExactly(
              kind == FaultKind.ANSWER_LOST ? ApplyOutcome.REPLAY : ApplyOutcome.APPLIED);
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).as("%s: exactly one effect", kind).isEqualTo(1);
    } finally {
      commands.close();
    }
  }

  @Test
  void aClaimWhoseCommitAnswerWasLostIsClaimedAgainAndTheRunnerAppliesWithTheNewerEpoch(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("lost-claim"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 1);
    AtomicReference<InjectedFault> claimFault = new AtomicReference<>();
    try (JdbcFaults faults = JdbcFaults.pool(pg.jdbcUrl())) {
      RecordingEvents events =
          new RecordingEvents() {
            @Override
            public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
              super.outcome(partition, offset, epoch, outcome);
              if (outcome == ApplyOutcome.FENCED) {
                // The fenced runner steps aside and claims again after the next rebalance: with
                // no apply in between, its next COMMIT is that claim's.
                claimFault.set(faults.onNextCommit(FaultKind.ANSWER_LOST));
              }
            }
          };
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              faults.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "reclaiming").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              Bank.handler("reclaiming"),
              Safeguards.ALL,
              events)) {
        owner.createTableIfMissing();
        owner.start();
        assertThat(events.claimed.await(60, TimeUnit.SECONDS)).as("partition 0 claimed").isTrue();
        // A late claim by another member (Caveats) fences the runner's epoch 1 with epoch 2.
        new OwnerTable(DSL.name(OwnershipConfig.DEFAULT_TABLE))
            .claim(pg.dsl(), group, topic, 0, 1, "late-member", Duration.ofSeconds(5), 0L);

        commands.send(1);
        await("the record applied, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 1 || !owner.isRunning());

        assertThat(claimFault.get())
            .as("the runner was fenced, so the fault was armed")
            .isNotNull();
        claimFault.get().assertFired();
        assertThat(owner.failure().toJavaOptional()).isEmpty();
        assertThat(events.backoffs).as("one backend failure: the lost claim").hasSize(1);
        assertThat(events.claims)
            .extracting(RecordingEvents.Claimed::epoch)
            .as("epoch 3 went to the claim whose answer was lost, epoch 4 to its retry")
            .containsExactly(1L, 4L);
        assertThat(events.outcomes)
            .containsExactly(
                new RecordingEvents.Outcome(0, 0, 1, ApplyOutcome.FENCED),
                new RecordingEvents.Outcome(0, 0, 4, ApplyOutcome.APPLIED));
        assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0))
            .isEqualTo(new OwnerRows.Row(4, "reclaiming", 0));
      }
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).as("exactly one effect").isEqualTo(1);
    } finally {
      commands.close();
    }
  }

  @ParameterizedTest
  @EnumSource(FaultKind.class)
  void aRecordWhoseCommitWasLostIsAppliedOnceWhenThePartitionMovesBeforeTheRetry(
      FaultKind kind, KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("lost-commit-moved"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 1);
    RecordingEvents first = new RecordingEvents();
    try (JdbcFaults faults = JdbcFaults.pool(pg.jdbcUrl())) {
      // The first owner's clock never moves, so its backoff never ends: the retry is left to the
      // next owner.
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              faults.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "first")
                  .clock(new ManualLeaseClock())
                  .build(),
              new StringDeserializer(),
              new StringDeserializer(),
              Bank.handler("first"),
              Safeguards.ALL,
              first)) {
        owner.createTableIfMissing();
        owner.start();
        assertThat(first.claimed.await(60, TimeUnit.SECONDS)).as("partition 0 claimed").isTrue();
        InjectedFault fault = faults.onNextCommit(kind);
        commands.send(1);
        assertThat(first.backedOff.await(60, TimeUnit.SECONDS))
            .as("the first owner backs off after the lost commit")
            .isTrue();
        fault.assertFired();
        assertThat(first.outcomes).as("the first owner heard no outcome").isEmpty();
      } // close(): the partition is revoked and handed over, its retry still pending

      Map<TopicPartition, OffsetAndMetadata> committed =
          kafka.admin().listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
      OffsetAndMetadata position = committed.get(new TopicPartition(topic, 0));
      assertThat(position == null ? 0 : position.offset())
          .as("Kafka's committed position does not cover the record: only the table knows")
          .isZero();

      RecordingEvents next = new RecordingEvents();
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "next").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              Bank.handler("next"),
              Safeguards.ALL,
              next)) {
        owner.start();
        assertThat(next.claimed.await(60, TimeUnit.SECONDS)).as("partition 0 claimed").isTrue();
        commands.send(1);
        await("both records applied")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 2 || !owner.isRunning());
        assertThat(owner.failure().toJavaOptional()).isEmpty();
        long epoch = next.claims.get(0).epoch();
        if (kind == FaultKind.ANSWER_LOST) {
          assertThat(next.claims.get(0).lastApplied())
              .as("the lost answer's apply had committed")
              .isZero();
          assertThat(next.outcomes)
              .as("the next owner starts after the record whose answer was lost")
              .containsExactly(new RecordingEvents.Outcome(0, 1, epoch, ApplyOutcome.APPLIED));
        } else {
          assertThat(next.claims.get(0).lastApplied())
              .as("the lost request's apply had rolled back")
              .isEqualTo(-1);
          assertThat(next.outcomes)
              .as("the next owner applies the record whose request was lost, then the new one")
              .containsExactly(
                  new RecordingEvents.Outcome(0, 0, epoch, ApplyOutcome.APPLIED),
                  new RecordingEvents.Outcome(0, 1, epoch, ApplyOutcome.APPLIED));
        }
      }
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).as("%s: one effect per record", kind).isEqualTo(2);
    } finally {
      commands.close();
    }
  }
}
