package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.TcpProxy;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A PostgreSQL outage long enough for dozens of failed applies in a row, at the longest base delay
 * the config allows: the runner keeps backing off (never more than the max delay) and keeps going,
 * and applies everything once the database is back. No real time is waited: the runner's clock is a
 * manual one that the test moves past each backoff as it starts.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class LongOutageIT {

  private static final int FAILURES = 45;
  private static final Duration BASE = Duration.ofMinutes(1);
  private static final Duration MAX = Duration.ofMinutes(10);

  /** Records each backoff and moves the manual clock past it, so the next turn retries. */
  private static final class Backoffs implements OwnerEvents {
    final ManualLeaseClock clock = new ManualLeaseClock();
    final List<Duration> delays = new CopyOnWriteArrayList<>();
    final CountDownLatch claimed = new CountDownLatch(1);

    @Override
    public void claimed(int partition, long epoch, long lastApplied) {
      claimed.countDown();
    }

    @Override
    public void backingOff(int failuresInARow, Duration delay, OwnerEvents.BackoffCause cause) {
      delays.add(delay);
      clock.advance(delay.plusNanos(1));
    }
  }

  @Test
  void theRunnerKeepsGoingThroughDozensOfFailuresInARowAtTheLongestBaseDelay(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("outage"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 5);
    Backoffs events = new Backoffs();
    SimpleMeterRegistry metrics = new SimpleMeterRegistry();
    try (TcpProxy proxy = TcpProxy.start(host(pg), port(pg));
        PartitionOwner<String, String> owner =
            PartitionOwner.withSafeguards(
                throughProxy(pg, proxy),
                TestOwners.config(kafka.bootstrapServers(), topic, group, "patient")
                    .retryBackoff(BASE, MAX)
                    .clock(events.clock)
                    .metrics(metrics, "test")
                    // The broker answers a fetch at once: a rewound partition is fetched again
                    // without waiting out the fetch in flight (500 ms by default) each turn.
                    .consumerProperty(ConsumerConfig.FETCH_MAX_WAIT_MS_CONFIG, 10)
                    .build(),
                new StringDeserializer(),
                new StringDeserializer(),
                Bank.handler("patient"),
                Safeguards.ALL,
                events)) {
      owner.createTableIfMissing();
      owner.start();
      assertThat(events.claimed.await(60, TimeUnit.SECONDS))
          .as("the partition was claimed")
          .isTrue();

      proxy.cut();
      commands.send(5);
      await(FAILURES + " failed applies in a row, or the runner stopped")
          .atMost(Duration.ofSeconds(60))
          .until(() -> events.delays.size() >= FAILURES || !owner.isRunning());

      assertThat(owner.failure().toJavaOptional())
          .as(
              "the runner survives %d PostgreSQL failures in a row at a base delay of %s",
              FAILURES, BASE)
          .isEmpty();
      assertThat(owner.isRunning()).isTrue();
      assertThat(events.delays)
          .as("every backoff lies within [0, max delay]")
          .allSatisfy(d -> assertThat(d).isBetween(Duration.ZERO, MAX));
      assertThat(OwnerRows.appliedThrough(pg.dsl(), group, topic))
          .as("nothing applied while cut")
          .isZero();

      proxy.restore();
      await("the 5 commands applied after the outage")
          .atMost(Duration.ofSeconds(60))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 5);
      assertThat(owner.isRunning()).isTrue();
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).isEqualTo(5);
      assertThat(metrics.get("nolock.ownership.backend.failures").counter().count())
          .isGreaterThanOrEqualTo(FAILURES);
    } finally {
      commands.close();
    }
  }

  private static PGSimpleDataSource throughProxy(PostgresSchema pg, TcpProxy proxy) {
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(pg.jdbcUrl().replace(host(pg) + ":" + port(pg), "127.0.0.1:" + proxy.port()));
    return dataSource;
  }

  private static String host(PostgresSchema pg) {
    return url(pg).group(1);
  }

  private static int port(PostgresSchema pg) {
    return Integer.parseInt(url(pg).group(2));
  }

  private static Matcher url(PostgresSchema pg) {
    Matcher m = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/").matcher(pg.jdbcUrl());
    assertThat(m.find()).as("host and port in %s", pg.jdbcUrl()).isTrue();
    return m;
  }
}
