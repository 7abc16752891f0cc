package dev.nolock.ownership;

import dev.nolock.testkit.ConcurrentCreators;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Runners that start at once on an empty schema all call {@code createTableIfMissing()}: none may
 * fail because another created the ownership table first (PostgreSQL answers the loser of {@code
 * CREATE TABLE IF NOT EXISTS} with SQLState 23505 or 42P07), and the table is checked as always.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreateIT {

  @Test
  void runnersCreatingTheTableAtOnceAllSucceed(PostgresSchema pg) {
    ConcurrentCreators.assertAllSucceed(
        pg,
        "racing_owners",
        5,
        table ->
            PartitionOwner.create(
                pg.dataSource(),
                OwnershipConfig.custom("127.0.0.1:9", "orders", "race").table(table).build(),
                new StringDeserializer(),
                new StringDeserializer(),
                (record, tx, epoch) -> {}),
        PartitionOwner::createTableIfMissing);
  }
}
