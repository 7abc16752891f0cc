package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/** What this backend adds to the contract: the kept row, the database clock, its failures. */
@ExtendWith(PostgresExtension.class)
class PostgresLockBackendRowIT {

  private static final Duration TTL = Duration.ofSeconds(10);
  private static final Duration SHORT_TTL = Duration.ofMillis(600);

  private final PostgresSchema schema;
  private final PostgresLockBackend backend;
  private final LockRows rows;

  PostgresLockBackendRowIT(PostgresSchema schema) {
    this.schema = schema;
    this.backend = PostgresLockBackend.create(schema.dataSource());
    this.rows = new LockRows(schema.dataSource(), PostgresLockConfig.DEFAULT_TABLE);
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    PostgresLockBackend backend = PostgresLockBackend.create(schema.dataSource());
    backend.createTableIfMissing();
    backend.createTableIfMissing(); // idempotent
  }

  @Test
  void releaseKeepsTheRowSoTokensKeepRising() {
    String name = "kept-row";
    FencingToken first = backend.tryAcquire(name, "A", TTL).get();
    assertThat(backend.release(name, "A", first)).isTrue();

    assertThat(rows.count(name)).as("the row survives the release").isEqualTo(1);
    assertThat(rows.expiredHolder(name)).contains(new LeaseHolder("A", first));

    FencingToken second = backend.tryAcquire(name, "B", TTL).get();
    assertThat(backend.release(name, "B", second)).isTrue();
    FencingToken third = backend.tryAcquire(name, "A", TTL).get();

    assertThat(second.value()).isEqualTo(first.value() + 1);
    assertThat(third.value()).isEqualTo(first.value() + 2);
    assertThat(rows.count(name)).isEqualTo(1);
  }

  @Test
  void aRefusedAcquireLeavesTheCounterAlone() {
    String name = "refused";
    FencingToken first = backend.tryAcquire(name, "A", TTL).get();

    assertThat(backend.tryAcquire(name, "B", TTL).isEmpty()).isTrue();
    assertThat(backend.tryAcquire(name, "C", TTL).isEmpty()).isTrue();
    backend.release(name, "A", first);

    assertThat(backend.tryAcquire(name, "B", TTL).get().value()).isEqualTo(first.value() + 1);
  }

  @Test
  void theTtlIsCountedOnTheDatabaseClock() {
    String name = "db-clock";
    FencingToken token = backend.tryAcquire(name, "A", SHORT_TTL).get();

    Duration afterAcquire = rows.remaining(name);
    assertThat(afterAcquire).isPositive().isLessThanOrEqualTo(SHORT_TTL);

    assertThat(backend.renew(name, "A", token, SHORT_TTL)).isTrue();
    Duration afterRenewal = rows.remaining(name);
    assertThat(afterRenewal).isPositive().isLessThanOrEqualTo(SHORT_TTL);
  }

  @Test
  void releaseEndsTheLeaseAtTheDatabasesNow() {
    String name = "released-now";
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();

    assertThat(backend.release(name, "A", token)).isTrue();

    assertThat(rows.remaining(name)).isLessThanOrEqualTo(Duration.ZERO);
    assertThat(backend.renew(name, "A", token, TTL)).as("no renewal after release").isFalse();
  }

  @Test
  void aPoolWithAutocommitOffStillCommitsEveryStatement() {
    String name = "autocommit-off";
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(schema.jdbcUrl());
    config.setAutoCommit(false);
    config.setMaximumPoolSize(2);
    config.setMinimumIdle(0);
    try (HikariDataSource pool = new HikariDataSource(config)) {
      PostgresLockBackend onPool = PostgresLockBackend.create(pool);

      FencingToken token = onPool.tryAcquire(name, "A", TTL).get();
      assertThat(rows.liveHolder(name))
          .as("seen from another connection")
          .contains(new LeaseHolder("A", token));

      assertThat(onPool.renew(name, "A", token, TTL)).isTrue();
      assertThat(onPool.release(name, "A", token)).isTrue();
      assertThat(rows.expiredHolder(name)).contains(new LeaseHolder("A", token));
    }
  }

  @Test
  void aStatementBlockedPastTheQueryTimeoutFailsAsBackendUnavailable() throws Exception {
    String name = "blocked";
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    PostgresLockBackend impatient =
        PostgresLockBackend.create(
            schema.dataSource(),
            PostgresLockConfig.custom().queryTimeout(Duration.ofSeconds(1)).build());
    try (Connection blocker = schema.dataSource().getConnection()) {
      blocker.setAutoCommit(false);
      try (PreparedStatement lockRow =
          blocker.prepareStatement("SELECT 1 FROM nolock_locks WHERE name = ? FOR UPDATE")) {
        lockRow.setString(1, name);
        try (ResultSet rs = lockRow.executeQuery()) {
          assertThat(rs.next()).isTrue();
        }
      }

      assertThatThrownBy(() -> impatient.renew(name, "A", token, TTL))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("renewing lock \"blocked\"")
          .hasMessageContaining("deadline");
      blocker.rollback();
    }
  }

  @Test
  void anUnreachableDatabaseFailsAsBackendUnavailableNamingTheLock() {
    PGSimpleDataSource nowhere = new PGSimpleDataSource();
    nowhere.setServerNames(new String[] {"127.0.0.1"});
    nowhere.setPortNumbers(new int[] {1});
    nowhere.setDatabaseName("test");
    nowhere.setConnectTimeout(2);
    PostgresLockBackend unreachable = PostgresLockBackend.create(nowhere);

    assertThatThrownBy(() -> unreachable.tryAcquire("invoice-7", "A", TTL))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("acquiring lock \"invoice-7\"")
        .hasMessageContaining("retry later");
    assertThatThrownBy(() -> unreachable.release("invoice-7", "A", FencingToken.of(3)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("releasing lock \"invoice-7\" (token 3)");
  }
}
