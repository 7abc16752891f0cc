package dev.nolock.cas;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.VersionedStoreProperties;
import java.time.Duration;
import java.util.UUID;
import javax.sql.DataSource;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * {@link VersionedStoreProperties} on the real PostgreSQL: the store under faults runs over {@link
 * JdbcFaults}, the plain one (and the reads) over an ordinary pool, on a table of this class's own.
 */
class VersionColumnStorePropertiesIT extends VersionedStoreProperties {

  private static final String TABLE =
      "props_counters_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);

  private static HikariDataSource pool;
  private static JdbcFaults faults;
  private static VersionColumnStore<String, Long> plain;
  private static VersionColumnStore<String, Long> faulty;

  @BeforeContainer
  static void createTable() {
    String url = Endpoints.fromEnvironment().postgresUrl();
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setMaximumPoolSize(2);
    pool = new HikariDataSource(config);
    DSL.using(pool, SQLDialect.POSTGRES).execute(Tables.COUNTERS_DDL.replace("counters", TABLE));
    faults = JdbcFaults.pool(url);
    plain = store(pool);
    faulty = store(faults.dataSource());
  }

  @AfterContainer
  static void dropTable() {
    DSL.using(pool, SQLDialect.POSTGRES).execute("DROP TABLE IF EXISTS " + TABLE);
    faults.close();
    pool.close();
  }

  private static VersionColumnStore<String, Long> store(DataSource dataSource) {
    return VersionColumnStore.create(
        dataSource,
        VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
            .retryPolicy(
                RetryPolicy.custom().maxAttempts(5).baseDelay(Duration.ofMillis(1)).build())
            .build());
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return plain;
  }

  @Override
  protected VersionedStore<String, Long> faultyStore() {
    return faulty;
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind) {
    faults.disarmAll(); // a fault armed for a call that never sent its statement
    return faults.onNextStatement(
        kind,
        JdbcFaults.sqlContaining(
            switch (op) {
              case INSERT -> "insert";
              case COMPARE_AND_SET, UPDATE -> "update \"" + TABLE + "\" set";
              case DELETE -> "delete";
            }));
  }
}
