package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LockBackendContract;
import dev.nolock.testkit.PgBouncer;
import dev.nolock.testkit.PgBouncerExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The whole contract again, with every backend statement going through PgBouncer in transaction
 * pooling: each call is one statement in its own transaction, so nothing depends on which server
 * connection serves it. The table is created directly in a fresh schema and named schema-qualified,
 * because connections through PgBouncer do not carry a search path.
 */
@ExtendWith({PostgresExtension.class, PgBouncerExtension.class})
class PostgresLockBackendThroughPgBouncerIT extends LockBackendContract {

  private static HikariDataSource throughPgBouncer;
  private static PostgresLockBackend backend;
  private static LockRows rows;

  @BeforeAll
  static void connect(PostgresSchema schema, PgBouncer pgBouncer) {
    assertThat(pgBouncer.poolMode())
        .as("the pooling mode this test is about")
        .isEqualTo("transaction");
    String table = schema.schemaName() + "." + PostgresLockConfig.DEFAULT_TABLE;
    PostgresLockConfig config = PostgresLockConfig.custom().table(table).build();
    PostgresLockBackend.create(schema.dataSource(), config).createTableIfMissing();

    HikariConfig pool = new HikariConfig();
    pool.setJdbcUrl(pgBouncer.jdbcUrl());
    pool.setMaximumPoolSize(FUZZ_THREADS);
    pool.setMinimumIdle(0);
    pool.setPoolName("nolock-pgbouncer-lock-it");
    throughPgBouncer = new HikariDataSource(pool);
    backend = PostgresLockBackend.create(throughPgBouncer, config);
    rows = new LockRows(schema.dataSource(), table);
  }

  @AfterAll
  static void disconnect() {
    if (throughPgBouncer != null) {
      throughPgBouncer.close();
    }
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return rows.peek(name);
  }
}
