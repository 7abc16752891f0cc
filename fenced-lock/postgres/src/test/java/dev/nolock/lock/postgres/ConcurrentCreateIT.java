package dev.nolock.lock.postgres;

import dev.nolock.testkit.ConcurrentCreators;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Backends that start at once on an empty schema all call {@code createTableIfMissing()}: none may
 * fail because another created the lease table first (PostgreSQL answers the loser of {@code CREATE
 * TABLE IF NOT EXISTS} with SQLState 23505 or 42P07).
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreateIT {

  @Test
  void backendsCreatingTheTableAtOnceAllSucceed(PostgresSchema pg) {
    ConcurrentCreators.assertAllSucceed(
        pg,
        "racing_locks",
        5,
        table ->
            PostgresLockBackend.create(
                pg.dataSource(), PostgresLockConfig.custom().table(table).build()),
        PostgresLockBackend::createTableIfMissing);
  }
}
