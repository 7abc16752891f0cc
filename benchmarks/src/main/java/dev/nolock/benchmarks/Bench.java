package dev.nolock.benchmarks;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.net.URI;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * What every benchmark JVM needs: the endpoints {@link Main} resolved (passed to each worker JVM as
 * system properties, so an embedded fallback server started by the runner is the one the workers
 * use), connection pools sized for the thread count, and schemas and key prefixes of their own so
 * variants never see each other's rows.
 */
public final class Bench {

  public static final String PG_URL = "nolock.pg.url";
  public static final String REDIS_URI = "nolock.redis.uri";
  public static final String DYNAMODB_ENDPOINT = "nolock.dynamodb.endpoint";
  public static final String KAFKA_BOOTSTRAP = "nolock.kafka.bootstrap";

  private Bench() {}

  public static String pgUrl() {
    return setting(PG_URL, "NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
  }

  public static String redisUri() {
    return setting(REDIS_URI, "NOLOCK_REDIS_URI", "redis://127.0.0.1:6379");
  }

  public static String dynamoDbEndpoint() {
    return setting(DYNAMODB_ENDPOINT, "NOLOCK_DYNAMODB_ENDPOINT", "http://127.0.0.1:4567");
  }

  public static String kafkaBootstrap() {
    return setting(KAFKA_BOOTSTRAP, "NOLOCK_KAFKA_BOOTSTRAP", "127.0.0.1:9092");
  }

  /**
   * {@code endpoint} without its password, for what the run prints and records: a URI's user
   * information ({@code redis://:PASSWORD@host}) and a JDBC URL's {@code password=} parameter.
   */
  static String withoutPassword(String endpoint) {
    return endpoint
        .replaceAll("(://[^/@:]*:)[^/@]*@", "$1***@")
        .replaceAll("([?&]password=)[^&]*", "$1***");
  }

  private static String setting(String property, String environment, String fallback) {
    String value = System.getProperty(property);
    if (value == null || value.isBlank()) {
      value = System.getenv(environment);
    }
    return value == null || value.isBlank() ? fallback : value;
  }

  /**
   * A pool with one connection per benchmark thread plus two, so a thread never waits for a
   * connection: the figures measure the database, not the pool.
   */
  public static HikariDataSource pool(int threads) {
    return pool(threads, "public");
  }

  /** The same pool with {@code schema} as every connection's default schema. */
  public static HikariDataSource pool(int threads, String schema) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(pgUrl());
    config.setSchema(schema);
    config.setMaximumPoolSize(threads + 2);
    config.setMinimumIdle(threads + 2);
    config.setPoolName("bench");
    return new HikariDataSource(config);
  }

  /**
   * A fresh schema for one trial, with a pool whose connections use it: tables keep the names a
   * user's code would give them (jOOQ's generated-style classes need fixed names) and trials never
   * share rows. {@link PgSchema#close()} drops it.
   */
  public static PgSchema freshSchema(int threads) {
    if (TurnWorker.active()) {
      // The run moves to the next thread count for good: free the last one's connections.
      WORKER_SCHEMAS.keySet().stream()
          .filter(other -> other != threads)
          .toList()
          .forEach(other -> WORKER_SCHEMAS.remove(other).drop());
      return WORKER_SCHEMAS.computeIfAbsent(threads, Bench::newSchema).emptied();
    }
    return newSchema(threads);
  }

  /**
   * In a worker of a paired run ({@link TurnWorker}), one schema and pool for the thread count of
   * the current cell (cells run thread count by thread count), emptied before each turn: a turn
   * then costs a {@code DROP SCHEMA}, not a new pool of connections. Dropped when the run moves to
   * another thread count, and when the worker ends.
   */
  private static final Map<Integer, PgSchema> WORKER_SCHEMAS = new ConcurrentHashMap<>();

  static {
    if (TurnWorker.active()) {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(() -> WORKER_SCHEMAS.values().forEach(PgSchema::drop), "drop-schemas"));
    }
  }

  private static PgSchema newSchema(int threads) {
    String name = unique("bench");
    try (HikariDataSource admin = pool(0);
        java.sql.Connection connection = admin.getConnection();
        java.sql.Statement statement = connection.createStatement()) {
      statement.execute("CREATE SCHEMA " + name); // name is ours: bench_ + 12 hex digits
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException("cannot create a schema on " + pgUrl() + ": " + e, e);
    }
    return new PgSchema(name, pool(threads, name));
  }

  /** A trial's schema and its pool. */
  public record PgSchema(String name, HikariDataSource dataSource) implements AutoCloseable {

    /** Runs DDL or a fill statement outside any benchmark measurement. */
    public void execute(String sql) {
      try (java.sql.Connection connection = dataSource.getConnection();
          java.sql.Statement statement = connection.createStatement()) {
        statement.execute(sql);
      } catch (java.sql.SQLException e) {
        throw new IllegalStateException(sql + ": " + e, e);
      }
    }

    /** The same schema with every table dropped, its pool's connections kept. */
    PgSchema emptied() {
      execute("DROP SCHEMA " + name + " CASCADE");
      execute("CREATE SCHEMA " + name);
      return this;
    }

    /** Drops it, except in a worker of a paired run, where the next turn empties it. */
    @Override
    public void close() {
      if (!TurnWorker.active()) {
        drop();
      }
    }

    void drop() {
      execute("DROP SCHEMA " + name + " CASCADE");
      dataSource.close();
    }
  }

  public static DynamoDbClient dynamoDb() {
    return DynamoDbClient.builder()
        .endpointOverride(URI.create(dynamoDbEndpoint()))
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("bench", "bench")))
        .build();
  }

  /** A lower-case name unique to this trial, valid as an SQL identifier and a key prefix. */
  public static String unique(String prefix) {
    return prefix + "_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
  }

  /** Key 0 when {@code keys} is 1 (the hot key), otherwise one drawn uniformly. */
  public static int pick(int keys) {
    return keys == 1 ? 0 : ThreadLocalRandom.current().nextInt(keys);
  }
}
