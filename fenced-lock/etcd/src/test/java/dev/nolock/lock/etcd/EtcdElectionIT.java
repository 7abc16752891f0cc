package dev.nolock.lock.etcd;

import dev.nolock.lock.ElectorCandidate;
import dev.nolock.lock.LeaderElector;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.ElectionContract;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.EtcdExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Three {@link LeaderElector} candidates in child JVMs on the etcd backend (the term's token is the
 * key's create revision); the leader's writes go to a PostgreSQL row through the SQL fence.
 */
@ExtendWith({PostgresExtension.class, EtcdExtension.class})
class EtcdElectionIT extends ElectionContract {

  private static final String URL_PROPERTY = "nolock.election.jdbcUrl";
  private static final String ETCD_PROPERTY = "nolock.election.etcd";
  private static final String PREFIX_PROPERTY = "nolock.election.prefix";
  private static final String ETCD = Endpoints.fromEnvironment().etcdEndpoint();
  private static final String PREFIX = "/nolock-election/" + UUID.randomUUID() + "/";
  private static String jdbcUrl;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    ElectorCandidate.createResourceTables(schema);
  }

  /** A candidate campaigning on etcd; the child JVM's constructor reads its settings. */
  public static final class Candidate extends ElectorCandidate {
    private final Client client;
    private final EtcdLockBackend backend;

    public Candidate() {
      this(
          System.getProperty(URL_PROPERTY),
          System.getProperty(ETCD_PROPERTY),
          System.getProperty(PREFIX_PROPERTY));
    }

    Candidate(String url, String etcd, String prefix) {
      super(url);
      this.client = Client.builder().endpoints(etcd).build();
      // A cold JVM's first gRPC call can take seconds (class loading, channel set-up); warm the
      // channel up before campaigning, so that it does not eat the first leader's lease.
      client.getKVClient().get(ByteSequence.from(prefix, StandardCharsets.UTF_8)).join();
      this.backend =
          EtcdLockBackend.create(client, EtcdLockConfig.custom().keyPrefix(prefix).build());
    }

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected void closeResources() {
      client.close();
    }
  }

  @Override
  protected Class<? extends ElectionCandidate> candidateType() {
    return Candidate.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl, ETCD_PROPERTY, ETCD, PREFIX_PROPERTY, PREFIX);
  }

  @Override
  protected ElectionCandidate newReader() {
    return new Candidate(jdbcUrl, ETCD, PREFIX);
  }

  @Override
  protected String label() {
    return "Leader election on etcd";
  }
}
