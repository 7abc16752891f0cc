package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PostgresExtension.class)
class SchemaIT {

  /**
   * A keys table that exists without a column the library writes is refused by {@code
   * createTableIfMissing()} with the DDL that fits; nothing is altered. Before, the call created
   * the sequence and went on to the indexes, and failed on the partial index with an
   * IllegalStateException carrying PostgreSQL's "column state does not exist" (or, with the indexes
   * already there, succeeded and left the first execute to fail).
   */
  @Test
  void aTableWithoutAColumnTheLibraryWritesIsRefusedWithTheDdlThatFits(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE short_keys (scope varchar(200) NOT NULL,"
                + " idempotency_key varchar(255) NOT NULL, fingerprint varchar(64) NOT NULL,"
                + " PRIMARY KEY (scope, idempotency_key))");
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            pg.dataSource(),
            IdempotencyConfig.custom().table("short_keys").build(),
            ResultCodec.utf8());

    assertThatThrownBy(keys::createTableIfMissing)
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.table()).isEqualTo("short_keys");
              assertThat(e.problem())
                  .contains("column state is missing")
                  .contains("column expires_at is missing");
              assertThat(String.join("\n", e.ddl()))
                  .contains("create table if not exists")
                  .contains("state");
            })
        .hasMessageContaining("short_keys");
  }
}
