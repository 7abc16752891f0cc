package dev.nolock.patterns.sql;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;

/** The PostgreSQL the tests use: {@code NOLOCK_PG_URL} (property or environment), else loopback. */
final class Pg {

  private Pg() {}

  static String url() {
    String configured = System.getProperty("NOLOCK_PG_URL");
    configured =
        configured == null || configured.isBlank() ? System.getenv("NOLOCK_PG_URL") : configured;
    return configured == null || configured.isBlank()
        ? "jdbc:postgresql://127.0.0.1:5432/test?user=postgres"
        : configured;
  }

  static HikariDataSource pool() {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url());
    config.setMaximumPoolSize(2);
    config.setMinimumIdle(0);
    return new HikariDataSource(config);
  }
}
