package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.CapturedStderr;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.awaitility.Awaitility;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** What the runner does when an apply fails: retry a backend failure, stop on anything else. */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class HandlerFailureIT {

  private static final String CARD = "4111-1111-1111-1111";

  @Test
  void aTransientDatabaseFailureIsRetriedAndTheRecordAppliesOnceInOrder(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("transient"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 5);
    AtomicInteger failuresLeft = new AtomicInteger(3);
    RecordHandler<String, String> bank = Bank.handler("flaky");
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (CapturedStderr log = new CapturedStderr();
        PartitionOwner<String, String> owner =
            PartitionOwner.create(
                pg.dataSource(),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "flaky")
                    .metrics(metrics, "test")
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                (record, tx, epoch) -> {
                  bank.apply(record, tx, epoch); // written, then rolled back by the failure below
                  if (record.offset() == 7 && failuresLeft.getAndDecrement() > 0) {
                    throw new DataAccessException(
                        "could not serialize access for card 4111-1111-1111-1111",
                        new SQLException("serialization", "40001"));
                  }
                })) {
      owner.createTableIfMissing();
      owner.start();
      commands.send(20);
      Awaitility.await("20 commands applied")
          .atMost(Duration.ofSeconds(60))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 20);
      assertThat(failuresLeft.get()).as("the failing record was tried 4 times").isEqualTo(-1);
      assertThat(log.text())
          .as("the backoff line names the failure without the handler's message")
          .contains("Failed while applying")
          .doesNotContain("4111");
      assertThat(owner.isRunning()).isTrue();
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).isEqualTo(20);
      Awaitility.await("the lag gauge of the owned partition reaches 0")
          .atMost(Duration.ofSeconds(30))
          .until(
              () -> metrics.get("nolock.ownership.lag").tag("partition", "0").gauge().value() == 0);
      assertThat(metrics.get("nolock.ownership.lag").gauges()).hasSize(1);
      assertThat(metrics.getMeters())
          .as("meters are tagged by instance, topic and partition, never by key")
          .allSatisfy(
              meter ->
                  assertThat(meter.getId().getTags())
                      .extracting(Tag::getKey)
                      .isSubsetOf("component", "name", "topic", "partition", "event"));
      assertThat(
              metrics
                  .get("nolock.ownership.records.applied")
                  .tag("partition", "0")
                  .counter()
                  .count())
          .isEqualTo(20);
    } finally {
      commands.close();
    }
  }

  @Test
  void aHandlerThatFailsForGoodStopsTheRunnerAndTheNextOneResumesAtThatRecord(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("poison"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 5);
    RecordHandler<String, String> bank = Bank.handler("strict");
    try {
      commands.send(10);
      String logged;
      try (CapturedStderr log = new CapturedStderr();
          PartitionOwner<String, String> strict =
              PartitionOwner.create(
                  pg.dataSource(),
                  TestOwners.config(kafka.bootstrapServers(), topic, group, "strict").build(),
                  new StringDeserializer(),
                  new StringDeserializer(),
                  (record, tx, epoch) -> {
                    bank.apply(record, tx, epoch);
                    if (record.offset() == 4) {
                      // The handler's message quotes the record, as a parser's would.
                      throw new IllegalArgumentException(
                          "cannot parse command " + record.value() + " for card " + CARD);
                    }
                  })) {
        strict.createTableIfMissing();
        strict.start();
        assertThat(strict.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(strict.failure().toJavaOptional())
            .get()
            .isInstanceOfSatisfying(
                IllegalStateException.class,
                e -> {
                  assertThat(e)
                      .hasMessageContaining(topic + "-0@4")
                      .hasMessageContaining("dead-letter");
                  assertThat(e.getCause())
                      .isInstanceOf(IllegalArgumentException.class)
                      .hasMessageContaining(CARD);
                });
        logged = log.text();
      }
      assertThat(logged)
          .as("the runner's log names the record and the handler's exception class, not its text")
          .doesNotContain(CARD)
          .contains(topic + "-0@4")
          .contains("java.lang.IllegalArgumentException");
      assertThat(OwnerRows.read(pg.dsl(), group, topic).get(0).lastApplied())
          .as("records 0..3 applied, the failed one rolled back")
          .isEqualTo(3);

      try (PartitionOwner<String, String> fixed =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, group, "fixed").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              Bank.handler("fixed"))) {
        fixed.start();
        Awaitility.await("the next runner resumes at offset 4")
            .atMost(Duration.ofSeconds(60))
            .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 10);
      }
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).isEqualTo(10);
    } finally {
      commands.close();
    }
  }
}
