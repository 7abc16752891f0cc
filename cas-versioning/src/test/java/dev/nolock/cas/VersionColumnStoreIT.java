package dev.nolock.cas;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.VersionedStoreContract;
import java.time.Duration;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/** The whole versioned-store contract against the real PostgreSQL, in a fresh schema. */
@ExtendWith(PostgresExtension.class)
class VersionColumnStoreIT extends VersionedStoreContract {

  static final String TABLE = "counters";
  static final String MISSING_TABLE = "no_such_counters";

  /** Retries bounded by time only: the contract fails on any give-up. */
  static final RetryPolicy TIME_CAP_ONLY =
      RetryPolicy.custom()
          .maxAttempts(Integer.MAX_VALUE)
          .maxElapsed(Duration.ofMinutes(2))
          .baseDelay(Duration.ofMillis(1))
          .maxDelay(Duration.ofMillis(50))
          .build();

  private final DSLContext dsl;
  private final VersionColumnStore<String, Long> store;
  private final VersionColumnStore<String, Long> storeOnMissingTable;

  VersionColumnStoreIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
                .retryPolicy(TIME_CAP_ONLY)
                .build());
    this.storeOnMissingTable =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(MISSING_TABLE, String.class, ValueCodec.longs())
                .build());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return store;
  }

  /** A plain {@code UPDATE counters SET value = :v WHERE id = :id}: no version check, no bump. */
  @Override
  protected void blindWrite(String id, long value) {
    dsl.update(table(name(TABLE)))
        .set(field(name("value"), Long.class), value)
        .where(field(name("id"), String.class).eq(id))
        .execute();
  }

  @Override
  protected VersionedStore<String, Long> storeOnMissingTable() {
    return storeOnMissingTable;
  }

  @Override
  protected String missingTableName() {
    return MISSING_TABLE;
  }
}
