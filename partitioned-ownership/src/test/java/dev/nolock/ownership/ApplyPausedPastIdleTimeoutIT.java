package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * An owner paused inside an apply transaction (a GC pause, CPU throttling) for longer than {@code
 * transactionIdleTimeout}: PostgreSQL ends its session and rolls the apply back, which is what the
 * timeout is for (the row lock must not be held for ever). When the owner wakes, its next statement
 * fails with SQLState {@code 25P03}; the apply did not commit, so the runner must retry the record,
 * not stop as if the handler had failed for good.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ApplyPausedPastIdleTimeoutIT {

  @Test
  void anOwnerPausedInsideAnApplyPastTheIdleTimeoutRetriesTheRecordAndAppliesItOnce(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("idle-timeout"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 1);
    RecordingEvents events = new RecordingEvents();
    RecordHandler<String, String> bank = Bank.handler("paused");
    AtomicBoolean pauseNext = new AtomicBoolean(true);
    AtomicInteger pausedSession = new AtomicInteger();
    CountDownLatch paused = new CountDownLatch(1);
    CountDownLatch wake = new CountDownLatch(1);
    try (PartitionOwner<String, String> owner =
        PartitionOwner.withSafeguards(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, "paused")
                .transactionIdleTimeout(Duration.ofMillis(500))
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            (record, tx, epoch) -> {
              if (pauseNext.getAndSet(false)) {
                // Inside the apply transaction: the ownership row is locked, the offset advanced.
                pausedSession.set(tx.fetchOne("SELECT pg_backend_pid()").get(0, Integer.class));
                paused.countDown();
                assertThat(wake.await(60, TimeUnit.SECONDS)).isTrue();
              }
              bank.apply(record, tx, epoch);
            },
            Safeguards.ALL,
            events)) {
      owner.createTableIfMissing();
      owner.start();
      assertThat(events.claimed.await(60, TimeUnit.SECONDS)).as("partition 0 claimed").isTrue();
      commands.send(1);
      assertThat(paused.await(60, TimeUnit.SECONDS)).as("the apply paused").isTrue();
      await("PostgreSQL ends the session idle in the paused apply transaction")
          .atMost(Duration.ofSeconds(30))
          .until(
              () ->
                  pg.dsl()
                              .fetchOne(
                                  "SELECT count(*) FROM pg_stat_activity WHERE pid = ?",
                                  pausedSession.get())
                              .get(0, Long.class)
                          == 0
                      || !owner.isRunning());
      wake.countDown();
      await("the record applied, or the runner stopped")
          .atMost(Duration.ofSeconds(60))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 1 || !owner.isRunning());

      assertThat(owner.failure().toJavaOptional())
          .as(
              "the server rolled the paused apply back (idle_in_transaction_session_timeout):"
                  + " the runner retries the record instead of stopping")
          .isEmpty();
      assertThat(events.backoffs).as("one backend failure, then a retry").hasSize(1);
      assertThat(events.outcomes)
          .extracting(RecordingEvents.Outcome::outcome)
          .containsExactly(ApplyOutcome.APPLIED);
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).as("exactly one effect").isEqualTo(1);
    } finally {
      commands.close();
    }
  }
}
