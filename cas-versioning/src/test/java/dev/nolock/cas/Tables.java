package dev.nolock.cas;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.RetryPolicy;
import javax.sql.DataSource;
import org.jooq.DSLContext;

/** Test tables and the blind writes that bypass the store. */
final class Tables {

  /** A counter per text key, the shape of the contract's store. */
  static final String COUNTERS_DDL =
      "CREATE TABLE IF NOT EXISTS counters"
          + " (id text PRIMARY KEY, version bigint NOT NULL, value bigint NOT NULL)";

  private Tables() {}

  /**
   * The store on {@code counters} that the lost-answer tests use: five attempts, with a manual
   * clock that its backoff advances instead of sleeping.
   */
  static VersionColumnStore<String, Long> counterStore(DataSource dataSource) {
    return VersionColumnStore.create(
        dataSource,
        VersionColumnStoreConfig.custom("counters", String.class, ValueCodec.longs())
            .retryPolicy(RetryPolicy.custom().maxAttempts(5).build())
            .clock(new ManualLeaseClock())
            .build());
  }

  /** Creates {@code name} shaped like {@code counters}. */
  static void createCounters(DSLContext dsl, String tableName) {
    dsl.execute(COUNTERS_DDL.replace("counters", tableName));
  }

  /**
   * Changes the row behind the store's back, the way a concurrent writer would: value + 100 and a
   * new version, so every compare-and-set based on an earlier read loses.
   */
  static void bumpBehindTheStoresBack(DSLContext dsl, String tableName, String id) {
    int rows =
        dsl.update(table(name(tableName)))
            .set(field(name("value"), Long.class), field(name("value"), Long.class).plus(100))
            .set(field(name("version"), Long.class), field(name("version"), Long.class).plus(1))
            .where(field(name("id"), String.class).eq(id))
            .execute();
    if (rows != 1) {
      throw new IllegalStateException("expected to bump one row of " + id + ", bumped " + rows);
    }
  }

  /** The stored version of {@code id}, read without the store. */
  static long versionOf(DSLContext dsl, String tableName, String id) {
    return dsl.select(field(name("version"), Long.class))
        .from(table(name(tableName)))
        .where(field(name("id"), String.class).eq(id))
        .fetchSingle()
        .value1();
  }
}
