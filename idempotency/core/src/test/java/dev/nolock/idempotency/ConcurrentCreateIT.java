package dev.nolock.idempotency;

import dev.nolock.testkit.ConcurrentCreators;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Instances that start at once on an empty schema all call {@code createTableIfMissing()}: none may
 * fail because another created the sequence, the table or an index first (PostgreSQL answers the
 * loser of {@code CREATE ... IF NOT EXISTS} with SQLState 23505 or 42P07), and the table is checked
 * as always.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreateIT {

  @Test
  void instancesCreatingTheTableAtOnceAllSucceed(PostgresSchema pg) {
    ConcurrentCreators.assertAllSucceed(
        pg,
        "racing_keys",
        5,
        table ->
            IdempotencyKeys.create(
                pg.dataSource(),
                IdempotencyConfig.custom().table(table).build(),
                ResultCodec.utf8()),
        IdempotencyKeys::createTableIfMissing);
  }
}
