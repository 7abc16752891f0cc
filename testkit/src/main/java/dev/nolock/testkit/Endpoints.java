package dev.nolock.testkit;

import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.JdbcUrls;
import dev.nolock.testkit.internal.Server;
import java.util.Objects;
import java.util.function.UnaryOperator;

/**
 * Where the test servers run: one immutable set of endpoints, validated when it is built.
 *
 * <p>{@link #fromEnvironment()} reads each endpoint from a system property of the variable's name
 * (so one test run can override it), else from the environment variable, else the loopback default.
 * The variables and defaults:
 *
 * <ul>
 *   <li>{@code NOLOCK_PG_URL}: {@value #DEFAULT_PG_URL}
 *   <li>{@code NOLOCK_REDIS_URI}: {@value #DEFAULT_REDIS_URI}
 *   <li>{@code NOLOCK_KAFKA_BOOTSTRAP}: {@value #DEFAULT_KAFKA_BOOTSTRAP}
 *   <li>{@code NOLOCK_DYNAMODB_ENDPOINT}: {@value #DEFAULT_DYNAMODB_ENDPOINT}
 *   <li>{@code NOLOCK_ETCD_ENDPOINT}: {@value #DEFAULT_ETCD_ENDPOINT}
 *   <li>{@code NOLOCK_PGBOUNCER_URL}: {@value #DEFAULT_PGBOUNCER_URL}
 * </ul>
 *
 * <p>Guarantee: every value of an {@code Endpoints} parses to at least one host and port; a
 * malformed value is refused with an {@link IllegalArgumentException} that names the variable and
 * shows a valid example. Whether the server is running is checked later, by the extension that uses
 * it.
 */
public final class Endpoints {

  public static final String DEFAULT_PG_URL = "jdbc:postgresql://127.0.0.1:5432/test?user=postgres";
  public static final String DEFAULT_REDIS_URI = "redis://127.0.0.1:6379";
  public static final String DEFAULT_KAFKA_BOOTSTRAP = "127.0.0.1:9092";
  public static final String DEFAULT_DYNAMODB_ENDPOINT = "http://127.0.0.1:4567";
  public static final String DEFAULT_ETCD_ENDPOINT = "http://127.0.0.1:2379";
  public static final String DEFAULT_PGBOUNCER_URL =
      "jdbc:postgresql://127.0.0.1:6432/test?user=postgres&prepareThreshold=0";

  private final String postgresUrl;
  private final String redisUri;
  private final String kafkaBootstrap;
  private final String dynamoDbEndpoint;
  private final String etcdEndpoint;
  private final String pgBouncerUrl;

  private Endpoints(Builder builder) {
    this.postgresUrl = builder.postgresUrl;
    this.redisUri = builder.redisUri;
    this.kafkaBootstrap = builder.kafkaBootstrap;
    this.dynamoDbEndpoint = builder.dynamoDbEndpoint;
    this.etcdEndpoint = builder.etcdEndpoint;
    this.pgBouncerUrl = builder.pgBouncerUrl;
  }

  /**
   * Endpoints from system properties, then environment variables, then loopback defaults.
   *
   * @throws IllegalArgumentException if a set value is malformed
   */
  public static Endpoints fromEnvironment() {
    return from(
        name -> {
          String property = System.getProperty(name);
          return property != null && !property.isBlank() ? property : System.getenv(name);
        });
  }

  /** The loopback defaults, ignoring the environment. */
  public static Endpoints defaults() {
    return builder().build();
  }

  /** A builder that starts from the loopback defaults. */
  public static Builder builder() {
    return new Builder();
  }

  /** A builder that starts from these endpoints, to change one of them. */
  public Builder toBuilder() {
    return new Builder()
        .postgresUrl(postgresUrl)
        .redisUri(redisUri)
        .kafkaBootstrap(kafkaBootstrap)
        .dynamoDbEndpoint(dynamoDbEndpoint)
        .etcdEndpoint(etcdEndpoint)
        .pgBouncerUrl(pgBouncerUrl);
  }

  /**
   * Reads each variable through {@code settings}; a null or blank answer means "use the default".
   */
  static Endpoints from(UnaryOperator<String> settings) {
    Builder builder = builder();
    String value;
    if ((value = setting(settings, Server.POSTGRES)) != null) {
      builder.postgresUrl(value);
    }
    if ((value = setting(settings, Server.REDIS)) != null) {
      builder.redisUri(value);
    }
    if ((value = setting(settings, Server.KAFKA)) != null) {
      builder.kafkaBootstrap(value);
    }
    if ((value = setting(settings, Server.DYNAMODB)) != null) {
      builder.dynamoDbEndpoint(value);
    }
    if ((value = setting(settings, Server.ETCD)) != null) {
      builder.etcdEndpoint(value);
    }
    if ((value = setting(settings, Server.PGBOUNCER)) != null) {
      builder.pgBouncerUrl(value);
    }
    return builder.build();
  }

  private static String setting(UnaryOperator<String> settings, Server server) {
    String value = settings.apply(server.variable());
    return value == null || value.isBlank() ? null : value.trim();
  }

  /** pgjdbc URL of the PostgreSQL server ({@code NOLOCK_PG_URL}). */
  public String postgresUrl() {
    return postgresUrl;
  }

  /** Lettuce URI of the Redis server ({@code NOLOCK_REDIS_URI}). */
  public String redisUri() {
    return redisUri;
  }

  /** Kafka {@code bootstrap.servers} ({@code NOLOCK_KAFKA_BOOTSTRAP}). */
  public String kafkaBootstrap() {
    return kafkaBootstrap;
  }

  /** HTTP endpoint of the DynamoDB-compatible server ({@code NOLOCK_DYNAMODB_ENDPOINT}). */
  public String dynamoDbEndpoint() {
    return dynamoDbEndpoint;
  }

  /** etcd client URL(s), comma-separated ({@code NOLOCK_ETCD_ENDPOINT}). */
  public String etcdEndpoint() {
    return etcdEndpoint;
  }

  /** pgjdbc URL through PgBouncer ({@code NOLOCK_PGBOUNCER_URL}). */
  public String pgBouncerUrl() {
    return pgBouncerUrl;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Endpoints that
        && postgresUrl.equals(that.postgresUrl)
        && redisUri.equals(that.redisUri)
        && kafkaBootstrap.equals(that.kafkaBootstrap)
        && dynamoDbEndpoint.equals(that.dynamoDbEndpoint)
        && etcdEndpoint.equals(that.etcdEndpoint)
        && pgBouncerUrl.equals(that.pgBouncerUrl);
  }

  @Override
  public int hashCode() {
    return Objects.hash(
        postgresUrl, redisUri, kafkaBootstrap, dynamoDbEndpoint, etcdEndpoint, pgBouncerUrl);
  }

  @Override
  public String toString() {
    // Only host:port lists: URLs may carry a password.
    return "Endpoints[postgres="
        + HostPort.ofJdbcPostgres(postgresUrl, Server.POSTGRES)
        + ", redis="
        + HostPort.ofRedisUri(redisUri, Server.REDIS)
        + ", kafka="
        + kafkaBootstrap
        + ", dynamodb="
        + dynamoDbEndpoint
        + ", etcd="
        + etcdEndpoint
        + ", pgbouncer="
        + HostPort.ofJdbcPostgres(pgBouncerUrl, Server.PGBOUNCER)
        + "]";
  }

  /**
   * Builds {@link Endpoints}; starts from the loopback defaults and checks each value as it is set,
   * so a mistake is reported at the line that made it.
   */
  public static final class Builder {
    private String postgresUrl = DEFAULT_PG_URL;
    private String redisUri = DEFAULT_REDIS_URI;
    private String kafkaBootstrap = DEFAULT_KAFKA_BOOTSTRAP;
    private String dynamoDbEndpoint = DEFAULT_DYNAMODB_ENDPOINT;
    private String etcdEndpoint = DEFAULT_ETCD_ENDPOINT;
    private String pgBouncerUrl = DEFAULT_PGBOUNCER_URL;

    private Builder() {}

    /** {@code jdbc:postgresql://host[:port]/database[?user=...]}. */
    public Builder postgresUrl(String url) {
      HostPort.ofJdbcPostgres(url, Server.POSTGRES);
      this.postgresUrl = url;
      return this;
    }

    /** {@code redis://host[:port][/database]} or {@code rediss://...}. */
    public Builder redisUri(String uri) {
      HostPort.ofRedisUri(uri, Server.REDIS);
      this.redisUri = uri;
      return this;
    }

    /** {@code host:port[,host:port...]}. */
    public Builder kafkaBootstrap(String bootstrapServers) {
      HostPort.ofBootstrapServers(bootstrapServers, Server.KAFKA);
      this.kafkaBootstrap = bootstrapServers;
      return this;
    }

    /** {@code http://host:port}: exactly one endpoint, as the AWS SDK takes one override. */
    public Builder dynamoDbEndpoint(String endpoint) {
      if (HostPort.ofHttpEndpoints(endpoint, Server.DYNAMODB, DEFAULT_DYNAMODB_ENDPOINT).size()
          != 1) {
        throw new IllegalArgumentException(
            "NOLOCK_DYNAMODB_ENDPOINT takes one URL, like "
                + DEFAULT_DYNAMODB_ENDPOINT
                + ", but was '"
                + endpoint
                + "'");
      }
      this.dynamoDbEndpoint = endpoint;
      return this;
    }

    /** {@code http://host:port[,http://host:port...]}. */
    public Builder etcdEndpoint(String endpoints) {
      HostPort.ofHttpEndpoints(endpoints, Server.ETCD, DEFAULT_ETCD_ENDPOINT);
      this.etcdEndpoint = endpoints;
      return this;
    }

    /**
     * {@code jdbc:postgresql://host:port/database[?...]}; {@code prepareThreshold}, if given, must
     * be 0 because server-side prepared statements break under transaction pooling.
     */
    public Builder pgBouncerUrl(String url) {
      HostPort.ofJdbcPostgres(url, Server.PGBOUNCER);
      JdbcUrls.parameter(url, "prepareThreshold")
          .filter(value -> !value.equals("0"))
          .ifPresent(
              value -> {
                throw new IllegalArgumentException(
                    "NOLOCK_PGBOUNCER_URL has prepareThreshold="
                        + value
                        + "; PgBouncer's transaction pooling needs prepareThreshold=0 (or leave it"
                        + " out and the testkit adds it): "
                        + DEFAULT_PGBOUNCER_URL);
              });
      this.pgBouncerUrl = url;
      return this;
    }

    public Endpoints build() {
      return new Endpoints(this);
    }
  }
}
