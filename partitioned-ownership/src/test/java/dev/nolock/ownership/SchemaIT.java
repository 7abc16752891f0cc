package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PostgresExtension.class)
class SchemaIT {

  /**
   * An ownership table that exists without a column the runner reads or writes is refused by {@code
   * createTableIfMissing()} with the DDL that fits. Before, the call succeeded (CREATE TABLE IF NOT
   * EXISTS left the table as it was) and the runner failed later, at start.
   */
  @Test
  void aTableWithoutAColumnTheRunnerNeedsIsRefusedWithTheDdlThatFits(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE short_owners (consumer_group varchar(255) NOT NULL,"
                + " topic varchar(249) NOT NULL, partition int NOT NULL,"
                + " epoch bigint NOT NULL, owner varchar(255),"
                + " PRIMARY KEY (consumer_group, topic, partition))");
    OwnershipConfig config =
        OwnershipConfig.custom("127.0.0.1:9", "orders", "schema-it").table("short_owners").build();
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            config,
            new StringDeserializer(),
            new StringDeserializer(),
            (record, tx, epoch) -> {})) {
      assertThatThrownBy(owner::createTableIfMissing)
          .isInstanceOfSatisfying(
              SchemaMismatchException.class,
              e -> {
                assertThat(e.table()).isEqualTo("short_owners");
                assertThat(e.problem())
                    .contains("column partition_count is missing")
                    .contains("column last_applied_offset is missing");
                assertThat(String.join("\n", e.ddl()))
                    .contains("CREATE TABLE IF NOT EXISTS")
                    .contains("last_applied_offset");
              });
    }
  }
}
