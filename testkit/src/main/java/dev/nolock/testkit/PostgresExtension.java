package dev.nolock.testkit;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.JdbcUrls;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import dev.nolock.testkit.internal.UniqueNames;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Objects;
import java.util.Properties;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Gives each test class a fresh schema on the real PostgreSQL server: resolves {@link
 * PostgresSchema} parameters (constructor, test and lifecycle methods).
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>before the class (or at the first parameter, when registered on an instance field) the
 *       server must accept a TCP connection, else the class fails with {@link
 *       ServerUnreachableException} naming {@code scripts/services up postgres};
 *   <li>a schema with a random name is created and a pool bound to it is opened, once per class
 *       ({@code @Nested} classes share their enclosing class's schema);
 *   <li>after the class the pool is closed and the schema dropped with {@code CASCADE}.
 * </ol>
 *
 * Needs {@code org.postgresql:postgresql}, {@code com.zaxxer:HikariCP} and {@code org.jooq:jooq} on
 * the test classpath.
 *
 * <pre>{@code
 * @ExtendWith(PostgresExtension.class)
 * class LedgerIT { ... }
 *
 * // or, with explicit endpoints:
 * @RegisterExtension
 * static final PostgresExtension POSTGRES = new PostgresExtension(Endpoints.fromEnvironment());
 * }</pre>
 */
public final class PostgresExtension implements BeforeAllCallback, ParameterResolver {

  private static final int MAX_POOL_SIZE = 8;

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public PostgresExtension() {
    this(Endpoints.fromEnvironment());
  }

  public PostgresExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    schema(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == PostgresSchema.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return schema(context);
  }

  private PostgresSchema schema(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context, PostgresExtension.class, endpoints, PostgresSchema.class, this::create);
  }

  private Closing<PostgresSchema> create() {
    String url = endpoints.postgresUrl();
    Reachability.requireReachable(Server.POSTGRES, HostPort.ofJdbcPostgres(url, Server.POSTGRES));
    // Generated, never taken from input, so it is safe to splice into DDL.
    String name = "nolock_t_" + UniqueNames.hex12();
    execute(url, "CREATE SCHEMA " + name);
    String schemaUrl = JdbcUrls.withParameter(url, "currentSchema", name);
    HikariDataSource pool;
    try {
      pool = new HikariDataSource(poolConfig(schemaUrl, name));
    } catch (RuntimeException e) {
      dropQuietly(url, name, e);
      throw e;
    }
    PostgresSchema schema =
        new PostgresSchema(name, schemaUrl, pool, DSL.using(pool, SQLDialect.POSTGRES));
    return new Closing<>(
        schema,
        () -> {
          try {
            pool.close();
          } finally {
            execute(url, "DROP SCHEMA IF EXISTS " + name + " CASCADE");
          }
        });
  }

  private static HikariConfig poolConfig(String schemaUrl, String name) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(schemaUrl);
    config.setPoolName("nolock-" + name);
    config.setMaximumPoolSize(MAX_POOL_SIZE);
    // Many test classes on 2 cores: hold connections only while they are used.
    config.setMinimumIdle(0);
    config.setConnectionTimeout(10_000);
    timeouts().forEach((key, value) -> config.addDataSourceProperty((String) key, value));
    return config;
  }

  /**
   * Defaults for pgjdbc (parameters in the URL win): a server that accepts TCP but never answers
   * must fail the test, not hang it.
   */
  static Properties timeouts() {
    Properties properties = new Properties();
    properties.setProperty("connectTimeout", "5");
    properties.setProperty("loginTimeout", "10");
    return properties;
  }

  private static void execute(String url, String sql) {
    Properties properties = timeouts();
    properties.setProperty("socketTimeout", "60");
    try (Connection connection = DriverManager.getConnection(url, properties);
        Statement statement = connection.createStatement()) {
      // A test that leaked an open transaction would otherwise make DROP wait forever.
      statement.execute("SET lock_timeout = '10s'");
      statement.execute(sql);
    } catch (SQLException e) {
      throw new IllegalStateException(
          "PostgreSQL ("
              + Server.POSTGRES.variable()
              + ") refused '"
              + sql
              + "': "
              + e.getMessage()
              + ". The URL's user must be allowed to create schemas in its"
              + " database, and no test may leave a transaction open on the schema.",
          e);
    }
  }

  private static void dropQuietly(String url, String name, RuntimeException cause) {
    try {
      execute(url, "DROP SCHEMA IF EXISTS " + name + " CASCADE");
    } catch (RuntimeException e) {
      cause.addSuppressed(e);
    }
  }
}
