package dev.nolock.benchmarks;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.zonky.test.db.postgres.embedded.EmbeddedPostgres;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.sql.Connection;
import java.sql.DriverManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import redis.embedded.RedisServer;

/**
 * Finds the servers the run needs. PostgreSQL and Redis fall back to embedded ones (zonky's
 * PostgreSQL binaries, codemonstur's redis-server) when none answers, so the main command works on
 * a machine with neither installed; Kafka and DynamoDB have no fallback, and the designs that need
 * them are reported as skipped with the reason. The worker JVMs read the endpoints from the
 * environment they inherit, or from {@link #forkProperties}; what the run prints and records names
 * them without their passwords.
 */
final class Servers implements AutoCloseable {

  /** How a server was provided, or why it was not. */
  record Use(String server, boolean available, String how) {}

  private final Map<String, Use> uses = new LinkedHashMap<>();
  private final List<AutoCloseable> embedded = new ArrayList<>();

  static Servers find(Consumer<String> progress) {
    Servers servers = new Servers();
    servers.postgres(progress);
    servers.redis(progress);
    servers.tcp("dynamodb", Bench.DYNAMODB_ENDPOINT, Bench.dynamoDbEndpoint(), "dynamodb");
    servers.tcp("kafka", Bench.KAFKA_BOOTSTRAP, "tcp://" + Bench.kafkaBootstrap(), "kafka");
    servers
        .uses
        .values()
        .forEach(use -> progress.accept("server " + use.server() + ": " + use.how()));
    return servers;
  }

  Map<String, Use> uses() {
    return uses;
  }

  boolean available(String server) {
    Use use = uses.get(server);
    return use != null && use.available();
  }

  /**
   * {@code -D} options for the endpoints a worker JVM cannot read from the environment it inherits:
   * those set as system properties here (an embedded server this runner started, or the runner's
   * own {@code -D}). The rest, the {@code NOLOCK_*} variables, reach the workers in their
   * environment: a worker's command line is readable by every local user and the report shows the
   * workers' options, and the services script starts Redis and PgBouncer with a password in their
   * URLs.
   *
   * @throws IllegalArgumentException for a {@code -D} endpoint with a password
   */
  static List<String> forkProperties() {
    List<String> options = new ArrayList<>();
    for (String property :
        List.of(Bench.PG_URL, Bench.REDIS_URI, Bench.DYNAMODB_ENDPOINT, Bench.KAFKA_BOOTSTRAP)) {
      String value = System.getProperty(property);
      if (value == null || value.isBlank()) {
        continue;
      }
      if (!Bench.withoutPassword(value).equals(value)) {
        throw new IllegalArgumentException(
            "-D"
                + property
                + " carries a password, which every worker JVM's command line would show: set it in"
                + " the environment instead (NOLOCK_PG_URL, NOLOCK_REDIS_URI).");
      }
      options.add("-D" + property + "=" + value);
    }
    return options;
  }

  private void postgres(Consumer<String> progress) {
    String url = Bench.pgUrl();
    try (Connection connection = DriverManager.getConnection(url + "&connectTimeout=3")) {
      String version = connection.getMetaData().getDatabaseProductVersion();
      uses.put(
          "postgres",
          new Use("postgres", true, "PostgreSQL " + version + " at " + Bench.withoutPassword(url)));
      return;
    } catch (Exception unreachable) {
      progress.accept(
          "no PostgreSQL at "
              + Bench.withoutPassword(url)
              + " ("
              + unreachable.getMessage()
              + "): starting an embedded one");
    }
    try {
      EmbeddedPostgres postgres = EmbeddedPostgres.builder().start();
      embedded.add(postgres);
      String embeddedUrl = postgres.getJdbcUrl("postgres", "postgres");
      System.setProperty(Bench.PG_URL, embeddedUrl);
      uses.put(
          "postgres", new Use("postgres", true, "embedded PostgreSQL (zonky) at " + embeddedUrl));
    } catch (IOException e) {
      uses.put(
          "postgres",
          new Use(
              "postgres",
              false,
              "none at " + Bench.withoutPassword(url) + " and the embedded one failed: " + e));
    }
  }

  private void redis(Consumer<String> progress) {
    String uri = Bench.redisUri();
    RedisURI redisUri = RedisURI.create(uri);
    redisUri.setTimeout(Duration.ofSeconds(3));
    RedisClient client = RedisClient.create(redisUri);
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      String version =
          connection
              .sync()
              .info("server")
              .lines()
              .filter(line -> line.startsWith("redis_version:"))
              .findFirst()
              .orElse("redis_version:?")
              .substring("redis_version:".length());
      uses.put(
          "redis",
          new Use("redis", true, "Redis " + version + " at " + Bench.withoutPassword(uri)));
      return;
    } catch (Exception unreachable) {
      progress.accept(
          "no Redis at "
              + Bench.withoutPassword(uri)
              + " ("
              + unreachable.getMessage()
              + "): starting an embedded one");
    } finally {
      client.shutdown();
    }
    try {
      int port = freePort();
      RedisServer server = RedisServer.newRedisServer().port(port).build();
      server.start();
      embedded.add(server::stop);
      String embeddedUri = "redis://127.0.0.1:" + port;
      System.setProperty(Bench.REDIS_URI, embeddedUri);
      uses.put(
          "redis", new Use("redis", true, "embedded redis-server (codemonstur) at " + embeddedUri));
    } catch (IOException e) {
      uses.put(
          "redis",
          new Use(
              "redis",
              false,
              "none at " + Bench.withoutPassword(uri) + " and the embedded one failed: " + e));
    }
  }

  private void tcp(String server, String property, String endpoint, String serviceName) {
    URI uri = URI.create(endpoint);
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(uri.getHost(), uri.getPort()), 3_000);
      uses.put(server, new Use(server, true, server + " at " + endpoint));
    } catch (IOException e) {
      uses.put(
          server,
          new Use(
              server,
              false,
              "nothing answers at "
                  + endpoint
                  + " ("
                  + e.getMessage()
                  + "); start it with"
                  + " scripts/services up "
                  + serviceName
                  + " or set -D"
                  + property));
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }

  @Override
  public void close() throws Exception {
    for (AutoCloseable server : embedded) {
      server.close();
    }
  }
}
