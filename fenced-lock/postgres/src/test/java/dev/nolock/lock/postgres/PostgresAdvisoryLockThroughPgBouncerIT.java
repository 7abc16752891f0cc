package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PgBouncer;
import dev.nolock.testkit.PgBouncerExtension;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The advisory-lock scenarios through PgBouncer in transaction pooling, where each transaction may
 * run on a different server connection: the transaction-level lock still excludes.
 */
@ExtendWith(PgBouncerExtension.class)
class PostgresAdvisoryLockThroughPgBouncerIT extends AdvisoryLockScenarios {

  private static HikariDataSource pool;
  private static DSLContext dsl;

  @BeforeAll
  static void connect(PgBouncer pgBouncer) {
    assertThat(pgBouncer.poolMode())
        .as("the pooling mode this test is about")
        .isEqualTo("transaction");
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(pgBouncer.jdbcUrl()); // prepareThreshold=0
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setPoolName("nolock-pgbouncer-advisory-it");
    pool = new HikariDataSource(config);
    dsl = DSL.using(pool, SQLDialect.POSTGRES);
  }

  @AfterAll
  static void disconnect() {
    if (pool != null) {
      pool.close();
    }
  }

  @Override
  protected DSLContext dsl() {
    return dsl;
  }
}
