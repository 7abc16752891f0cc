package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A failover as the runner's pool meets it: some pooled connections still reach the old primary,
 * now a standby, and every write on them fails with SQLState 25006 ({@code
 * read_only_sql_transaction}); the statement did not apply, and a retry on another connection
 * succeeds. Here the real PostgreSQL gives the real 25006: the checkouts the test arms come from a
 * pool whose sessions run {@code SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY}.
 *
 * <p>The first claim and the first apply of offset 3 run while the pool hands out such connections,
 * until the runner backs off (it reconnects then). Both must back off and retry, as after any
 * backend outage, and every record must apply once. Before, 25006 was "not transient": the failed
 * claim stopped the runner ({@code failure()} held the jOOQ exception), and so did the failed
 * apply.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ReadOnlyServerIT {

  @Test
  void aClaimAndAnApplyRefusedByAReadOnlyServerBackOffAndApplyEveryRecordOnce(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("read-only"), 1);
    String group = "owners-" + topic;
    Bank.freshTables(pg.dsl());
    Commands commands = new Commands(kafka.bootstrapServers(), topic, 1, 5);
    List<OwnerEvents.BackoffCause> causes = new CopyOnWriteArrayList<>();
    try (FailingOver pool = new FailingOver(pg)) {
      AtomicInteger lookups = new AtomicInteger();
      AtomicBoolean claimRefused = new AtomicBoolean();
      AtomicBoolean applyArmed = new AtomicBoolean();
      RecordingEvents events =
          new RecordingEvents() {
            @Override
            public void beforeLogStartLookup(Set<Integer> partitions) {
              // The first lookup is start()'s, before it records the rows; from the second on, a
              // claim (if the lookup succeeds) is next: it meets the old primary until one is
              // refused. The reads before it on the same path succeed there, as on a standby.
              if (lookups.incrementAndGet() >= 2 && !claimRefused.get()) {
                pool.failOver(true);
              }
            }

            @Override
            public void beforeApply(int partition, long offset, long epoch) {
              if (offset == 3 && applyArmed.compareAndSet(false, true)) {
                pool.failOver(true);
              }
            }

            @Override
            public void backingOff(
                int failuresInARow, Duration delay, OwnerEvents.BackoffCause cause) {
              causes.add(cause);
              if (cause != OwnerEvents.BackoffCause.APPLY) {
                claimRefused.set(true);
              }
              pool.failOver(false); // reconnected to the new primary
              super.backingOff(failuresInARow, delay, cause);
            }
          };
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              pool,
              TestOwners.config(kafka.bootstrapServers(), topic, group, "failover").build(),
              new StringDeserializer(),
              new StringDeserializer(),
              Bank.handler("failover"),
              Safeguards.ALL,
              events)) {
        owner.createTableIfMissing();
        owner.start();
        commands.send(10);
        Awaitility.await("10 commands applied, or the runner stopped")
            .atMost(Duration.ofSeconds(60))
            .until(
                () -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == 10 || !owner.isRunning());

        assertThat(owner.failure().toJavaOptional()).as("the runner's failure").isEmpty();
        assertThat(owner.isRunning()).isTrue();
        assertThat(pool.readOnlyCheckouts()).as("connections to the old primary").isPositive();
        assertThat(causes)
            .as("a backoff for a refused claim and one for the refused apply")
            .contains(OwnerEvents.BackoffCause.APPLY)
            .containsAnyOf(
                OwnerEvents.BackoffCause.CLAIM_IN_REBALANCE, OwnerEvents.BackoffCause.CLAIM_RETRY);
      }
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      assertThat(report.clean()).as(report.toString()).isTrue();
      assertThat(report.ledgerRows()).isEqualTo(10);
    } finally {
      commands.close();
    }
  }

  /**
   * The schema's pool, except while {@link #failOver} is on: then every checkout comes from a pool
   * whose sessions are read-only, a stand-in for connections to a demoted primary.
   */
  private static final class FailingOver implements DataSource, AutoCloseable {

    private final DataSource writable;
    private final HikariDataSource readOnly;
    private final AtomicBoolean failedOver = new AtomicBoolean();
    private final AtomicInteger handedOut = new AtomicInteger();

    FailingOver(PostgresSchema pg) {
      this.writable = pg.dataSource();
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl(pg.jdbcUrl());
      config.setPoolName("demoted-primary");
      config.setMaximumPoolSize(2);
      config.setMinimumIdle(0);
      config.setConnectionInitSql("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY");
      this.readOnly = new HikariDataSource(config);
    }

    void failOver(boolean on) {
      failedOver.set(on);
    }

    int readOnlyCheckouts() {
      return handedOut.get();
    }

    @Override
    public Connection getConnection() throws SQLException {
      if (failedOver.get()) {
        handedOut.incrementAndGet();
        return readOnly.getConnection();
      }
      return writable.getConnection();
    }

    @Override
    public Connection getConnection(String username, String password) throws SQLException {
      throw new SQLFeatureNotSupportedException("the test pool has one user");
    }

    @Override
    public PrintWriter getLogWriter() throws SQLException {
      return writable.getLogWriter();
    }

    @Override
    public void setLogWriter(PrintWriter out) throws SQLException {
      writable.setLogWriter(out);
    }

    @Override
    public void setLoginTimeout(int seconds) throws SQLException {
      writable.setLoginTimeout(seconds);
    }

    @Override
    public int getLoginTimeout() throws SQLException {
      return writable.getLoginTimeout();
    }

    @Override
    public Logger getParentLogger() throws SQLFeatureNotSupportedException {
      return writable.getParentLogger();
    }

    @Override
    public <T> T unwrap(Class<T> iface) throws SQLException {
      return writable.unwrap(iface);
    }

    @Override
    public boolean isWrapperFor(Class<?> iface) throws SQLException {
      return writable.isWrapperFor(iface);
    }

    @Override
    public void close() {
      readOnly.close();
    }
  }
}
