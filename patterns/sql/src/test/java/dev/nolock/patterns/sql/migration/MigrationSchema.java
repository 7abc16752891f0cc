package dev.nolock.patterns.sql.migration;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresSchema;
import java.util.concurrent.ThreadLocalRandom;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * A second (third, ...) fresh schema beside a test class's {@link PostgresSchema}, with a small
 * pool whose connections have it as their only {@code search_path} entry; {@link #close} closes the
 * pool and drops the schema with {@code CASCADE}. For tests that compare or migrate several
 * schemas.
 */
public final class MigrationSchema implements AutoCloseable {

  private final PostgresSchema base;
  private final String name;
  private final HikariDataSource pool;
  private final DSLContext dsl;

  private MigrationSchema(PostgresSchema base, String name, HikariDataSource pool) {
    this.base = base;
    this.name = name;
    this.pool = pool;
    this.dsl = DSL.using(pool, SQLDialect.POSTGRES);
  }

  /** Creates {@code <base schema>_<random>} and a pool on it. */
  public static MigrationSchema fresh(PostgresSchema base) {
    // Generated, never taken from input: safe to splice into DDL.
    String name =
        base.schemaName() + "_" + Integer.toHexString(ThreadLocalRandom.current().nextInt(1 << 24));
    base.dsl().execute("CREATE SCHEMA " + name);
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(
        base.jdbcUrl().replace("currentSchema=" + base.schemaName(), "currentSchema=" + name));
    config.setPoolName("nolock-" + name);
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(10_000);
    try {
      return new MigrationSchema(base, name, new HikariDataSource(config));
    } catch (RuntimeException e) {
      base.dsl().execute("DROP SCHEMA " + name + " CASCADE");
      throw e;
    }
  }

  public String name() {
    return name;
  }

  public DataSource dataSource() {
    return pool;
  }

  public DSLContext dsl() {
    return dsl;
  }

  @Override
  public void close() {
    try {
      pool.close();
    } finally {
      base.dsl().execute("DROP SCHEMA IF EXISTS " + name + " CASCADE");
    }
  }

  @Override
  public String toString() {
    return "MigrationSchema[" + name + "]";
  }
}
