package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PgBouncer;
import dev.nolock.testkit.PgBouncerExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * The queue behind the real PgBouncer in transaction pooling: every queue statement works there,
 * LISTEN does not, and the pool notices. The table is schema-qualified because connections through
 * PgBouncer carry no search path.
 */
@ExtendWith({PostgresExtension.class, PgBouncerExtension.class})
class ThroughPgBouncerIT {

  private static PostgresSchema schema;
  private static PgBouncer pgBouncer;
  private static HikariDataSource throughPgBouncer;
  private static String table;
  private static JobRows rows;

  @BeforeAll
  static void connect(PostgresSchema s, PgBouncer bouncer) {
    schema = s;
    pgBouncer = bouncer;
    assertThat(bouncer.poolMode())
        .as("the pooling mode this test is about")
        .isEqualTo("transaction");
    table = s.schemaName() + "." + QueueConfig.DEFAULT_TABLE;
    JobQueue.create(
            s.dataSource(), QueueConfig.custom("setup").table(table).build(), PayloadCodec.utf8())
        .createTableIfMissing();
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(bouncer.jdbcUrl());
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setPoolName("nolock-queue-pgbouncer-it");
    throughPgBouncer = new HikariDataSource(config);
    rows = new JobRows(s.dsl(), table);
  }

  @AfterAll
  static void disconnect() {
    if (throughPgBouncer != null) {
      throughPgBouncer.close();
    }
  }

  private static JobQueue<String> queue(String name, MeterRegistry registry) {
    return JobQueue.create(
        throughPgBouncer,
        QueueConfig.custom(name).table(table).metrics(registry, "it").build(),
        PayloadCodec.utf8());
  }

  @Test
  void listenThroughPgBouncerInTransactionPoolingNeverHearsTheNotifyThatADirectListenerHears()
      throws Exception {
    String channel = "nolock_it_" + UUID.randomUUID().toString().replace("-", "");
    try (Connection bounced = DriverManager.getConnection(pgBouncer.jdbcUrl());
        Connection direct = DriverManager.getConnection(schema.jdbcUrl());
        Connection notifier = DriverManager.getConnection(schema.jdbcUrl())) {
      for (Connection c : List.of(bounced, direct)) {
        try (Statement st = c.createStatement()) {
          st.execute("LISTEN " + channel); // a generated identifier, safe to splice
        }
      }
      try (Statement st = notifier.createStatement()) {
        st.execute("NOTIFY " + channel + ", 'hello'");
      }

      PGNotification[] heardDirectly = direct.unwrap(PGConnection.class).getNotifications(5_000);
      PGNotification[] heardThroughPgBouncer =
          bounced.unwrap(PGConnection.class).getNotifications(2_000);

      assertThat(heardDirectly).extracting(PGNotification::getParameter).containsExactly("hello");
      assertThat(heardThroughPgBouncer).as("silently lost, no error either").isNullOrEmpty();
    }
  }

  @Test
  void aPoolListeningThroughPgBouncerDetectsTheLostSelfTestAndFallsBackToPolling() {
    JobQueue<String> q = queue("bounced-polling", new SimpleMeterRegistry());
    List<WakeUp> seen = new ArrayList<>();
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom()
                .pollInterval(Duration.ofMillis(200))
                .selfTestTimeout(Duration.ofSeconds(1))
                .build(),
            job -> Completion.complete())) {
      await()
          .atMost(Duration.ofSeconds(15))
          .until(
              () -> {
                seen.add(pool.wakeUp());
                return pool.wakeUp() == WakeUp.POLLING;
              });
      assertThat(seen).doesNotContain(WakeUp.LISTENING);

      long id = ((EnqueueResult.Enqueued) q.enqueue(NewJob.of("polled"))).id();

      await().atMost(Duration.ofSeconds(5)).until(() -> rows.get(id).state() == JobState.DONE);
      assertThat(pool.wakeUp()).as("the self-test failure is final").isEqualTo(WakeUp.POLLING);
    }
  }

  @Test
  void aPoolOnPgBouncerWithADirectListenConnectionIsWokenByTheEnqueuesNotify() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue("bounced-direct-listen", registry);
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom()
                .pollInterval(Duration.ofMinutes(1))
                .listenDataSource(schema.dataSource())
                .build(),
            job -> Completion.complete())) {
      await().atMost(Duration.ofSeconds(10)).until(() -> pool.wakeUp() == WakeUp.LISTENING);
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> registry.get("nolock.queue.claim.duration").timer().count() >= 1);

      // Enqueued through PgBouncer: the NOTIFY rides in the enqueue's transaction.
      long id = ((EnqueueResult.Enqueued) q.enqueue(NewJob.of("notified"))).id();

      await().atMost(Duration.ofSeconds(2)).until(() -> rows.get(id).state() == JobState.DONE);
    }
  }
}
