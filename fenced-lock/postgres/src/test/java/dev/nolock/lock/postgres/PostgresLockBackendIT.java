package dev.nolock.lock.postgres;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LockBackendContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/** The whole lock-backend contract against the real PostgreSQL, in a fresh schema. */
@ExtendWith(PostgresExtension.class)
class PostgresLockBackendIT extends LockBackendContract {

  private final PostgresLockBackend backend;
  private final LockRows rows;

  PostgresLockBackendIT(PostgresSchema schema) {
    this.backend = PostgresLockBackend.create(schema.dataSource());
    this.rows = new LockRows(schema.dataSource(), PostgresLockConfig.DEFAULT_TABLE);
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
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
