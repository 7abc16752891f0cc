package dev.nolock.lock.etcd;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.SqlResource;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.EtcdExtension;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.vavr.control.Option;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/** The pause test on the etcd backend; the resource is a row behind the SQL fence. */
@ExtendWith({PostgresExtension.class, EtcdExtension.class})
class EtcdPauseIT extends PauseContract {

  private static final String URL_PROPERTY = "nolock.pause.jdbcUrl";
  private static final String ETCD_PROPERTY = "nolock.pause.etcd";
  private static final String PREFIX_PROPERTY = "nolock.pause.prefix";
  private static String jdbcUrl;
  private static final String ETCD = Endpoints.fromEnvironment().etcdEndpoint();
  private static final String PREFIX = "/nolock-pause/" + UUID.randomUUID() + "/";

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    SqlResource.on(schema.dsl(), "pause_resource").createTablesIfMissing();
  }

  /** A correctness holder on the etcd backend. */
  public static final class Holder implements PausableHolder {
    private final Client client;
    private final FencedLock locks;
    private final SqlResource resource;

    /** The child JVM's constructor: settings come from system properties. */
    public Holder() {
      this(
          System.getProperty(URL_PROPERTY),
          System.getProperty(ETCD_PROPERTY),
          System.getProperty(PREFIX_PROPERTY));
    }

    Holder(String url, String etcd, String prefix) {
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.resource = SqlResource.on(DSL.using(dataSource, SQLDialect.POSTGRES), "pause_resource");
      this.client = Client.builder().endpoints(etcd).build();
      // A cold JVM's first gRPC call can take seconds (class loading, channel set-up), and the
      // holder rightly counts that against a 3 s lease; warm the channel up first.
      client.getKVClient().get(ByteSequence.from(prefix, StandardCharsets.UTF_8)).join();
      this.locks =
          FencedLock.create(
              EtcdLockBackend.create(client, EtcdLockConfig.custom().keyPrefix(prefix).build()),
              LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      HeldLock held =
          locks
              .acquire(lockName, ttl, maxWait)
              .getOrElseThrow(n -> new IllegalStateException("not acquired: " + n));
      held.checkPointOfNoReturn(Duration.ofMillis(50));
      return held.lease();
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
      return resource.write(lease, value, protection);
    }

    @Override
    public Option<String> read(String lockName) {
      return resource.read(lockName);
    }

    @Override
    public void close() {
      locks.close();
      client.close();
    }
  }

  @Override
  protected Class<? extends PausableHolder> holderType() {
    return Holder.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl, ETCD_PROPERTY, ETCD, PREFIX_PROPERTY, PREFIX);
  }

  @Override
  protected PausableHolder newHolder() {
    return new Holder(jdbcUrl, ETCD, PREFIX);
  }

  @Override
  protected String label() {
    return "etcd lock";
  }
}
