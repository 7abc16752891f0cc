package dev.nolock.shedlock;

import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/** The ShedLock provider contract on the real PostgreSQL backend, in a fresh schema. */
@ExtendWith(PostgresExtension.class)
class PostgresShedLockProviderIT extends ShedLockProviderContract {

  private final PostgresLockBackend backend;

  PostgresShedLockProviderIT(PostgresSchema schema) {
    this.backend = PostgresLockBackend.create(schema.dataSource());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }
}
