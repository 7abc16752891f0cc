package dev.nolock.lock.redis;

import dev.nolock.lock.ElectorCandidate;
import dev.nolock.lock.LeaderElector;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.ElectionContract;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Three {@link LeaderElector} candidates in child JVMs on the Redis backend; the leader's writes go
 * to a PostgreSQL row through the SQL fence (the lease and the data need not share a server).
 */
@ExtendWith({PostgresExtension.class, RedisExtension.class})
class RedisElectionIT extends ElectionContract {

  private static final String URL_PROPERTY = "nolock.election.jdbcUrl";
  private static final String URI_PROPERTY = "nolock.election.redisUri";
  private static final String PREFIX_PROPERTY = "nolock.election.prefix";
  private static String jdbcUrl;
  private static String uri;
  private static String prefix;

  @BeforeAll
  static void setUp(PostgresSchema schema, RedisKeys keys) {
    jdbcUrl = schema.jdbcUrl();
    // The URI the extension read, password included: RedisURI.toURI() writes a placeholder in
    // place of the credentials.
    uri = Endpoints.fromEnvironment().redisUri();
    prefix = keys.prefix();
    ElectorCandidate.createResourceTables(schema);
  }

  /** A candidate campaigning on Redis; the child JVM's constructor reads its settings. */
  public static final class Candidate extends ElectorCandidate {
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;
    private final RedisLockBackend backend;

    public Candidate() {
      this(
          System.getProperty(URL_PROPERTY),
          System.getProperty(URI_PROPERTY),
          System.getProperty(PREFIX_PROPERTY));
    }

    Candidate(String url, String redisUri, String keyPrefix) {
      super(url);
      this.client = RedisClient.create(redisUri);
      this.connection = client.connect();
      this.backend =
          RedisLockBackend.create(
              connection, RedisLockBackendConfig.custom().keyPrefix(keyPrefix + "lock:").build());
    }

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected void closeResources() {
      connection.close();
      client.shutdown();
    }
  }

  @Override
  protected Class<? extends ElectionCandidate> candidateType() {
    return Candidate.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl, URI_PROPERTY, uri, PREFIX_PROPERTY, prefix);
  }

  @Override
  protected ElectionCandidate newReader() {
    return new Candidate(jdbcUrl, uri, prefix);
  }

  @Override
  protected String label() {
    return "Leader election on Redis";
  }
}
