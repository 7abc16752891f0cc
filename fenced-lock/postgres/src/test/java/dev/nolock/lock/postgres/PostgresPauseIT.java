package dev.nolock.lock.postgres;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.SqlResource;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Map;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/** The pause test on the PostgreSQL backend; the resource is a row behind the SQL fence. */
@ExtendWith(PostgresExtension.class)
class PostgresPauseIT extends PauseContract {

  private static final String URL_PROPERTY = "nolock.pause.jdbcUrl";
  private static String jdbcUrl;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    SqlResource.on(schema.dsl(), "pause_resource").createTablesIfMissing();
  }

  /** A correctness holder on the PostgreSQL backend. */
  public static final class Holder implements PausableHolder {
    private final FencedLock locks;
    private final SqlResource resource;

    /** The child JVM's constructor: settings come from system properties. */
    public Holder() {
      this(System.getProperty(URL_PROPERTY));
    }

    Holder(String url) {
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.resource = SqlResource.on(DSL.using(dataSource, SQLDialect.POSTGRES), "pause_resource");
      this.locks =
          FencedLock.create(
              PostgresLockBackend.create(dataSource),
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
    }
  }

  @Override
  protected Class<? extends PausableHolder> holderType() {
    return Holder.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl);
  }

  @Override
  protected PausableHolder newHolder() {
    return new Holder(jdbcUrl);
  }

  @Override
  protected String label() {
    return "PostgreSQL lock";
  }
}
