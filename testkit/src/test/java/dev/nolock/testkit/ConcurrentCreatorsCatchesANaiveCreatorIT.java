package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The negative control of {@link ConcurrentCreators}: a creator that runs {@code CREATE TABLE IF
 * NOT EXISTS} and nothing else, as the modules did, fails it with the error PostgreSQL answers the
 * loser of the race.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreatorsCatchesANaiveCreatorIT {

  @Test
  void aCreatorThatDoesNotTolerateALostRaceFails(PostgresSchema schema) {
    assertThatThrownBy(
            () ->
                ConcurrentCreators.assertAllSucceed(
                    schema,
                    "naive",
                    10,
                    table -> table,
                    table ->
                        schema
                            .dsl()
                            .execute(
                                "create table if not exists "
                                    + table
                                    + " (id bigint primary key, note text)")))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("duplicate key value violates unique constraint")
        .hasMessageContaining("createTableIfMissing calls that failed");
  }
}
