package dev.nolock.lock.redis;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.sql.SqlResource;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Redlock under a pause: five independent Redis instances, a holder that acquires a majority,
 * passes its validity check and is frozen with SIGSTOP before its write until the validity time has
 * passed; a second client acquires a majority: two holders. Without a fence the auditor reports the
 * lost update; with the fence the stale write is refused. Redlock survives the loss of instances
 * (for an efficiency lock); it does not survive a pause, and it has no token of its own.
 */
@ExtendWith(PostgresExtension.class)
class RedlockPauseIT extends PauseContract {

  private static final String PORTS = "nolock.redlock.ports";
  private static final String URL = "nolock.redlock.jdbcUrl";

  private static final List<PrivateRedisServer> instances = new ArrayList<>();
  private static String ports;
  private static String jdbcUrl;

  @BeforeAll
  static void start(PostgresSchema schema) throws IOException {
    for (int i = 0; i < 5; i++) {
      instances.add(PrivateRedisServer.start());
    }
    ports =
        instances.stream().map(s -> Integer.toString(s.port())).collect(Collectors.joining(","));
    jdbcUrl = schema.jdbcUrl();
    SqlResource.on(schema.dsl(), "redlock_resource").createTablesIfMissing();
  }

  @AfterAll
  static void stop() throws IOException {
    for (PrivateRedisServer s : instances) {
      s.close();
    }
  }

  /** A Redlock holder whose writes go to PostgreSQL, through the fence or around it. */
  public static final class Holder implements PausableHolder {
    private final Redlock redlock;
    private final SqlResource resource;
    private final String owner =
        "redlock-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID();

    public Holder() {
      this(System.getProperty(PORTS), System.getProperty(URL));
    }

    Holder(String ports, String url) {
      this.redlock = new Redlock(Arrays.stream(ports.split(",")).map(Integer::parseInt).toList());
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.resource =
          SqlResource.on(DSL.using(dataSource, SQLDialect.POSTGRES), "redlock_resource");
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      long giveUp = System.nanoTime() + maxWait.toNanos();
      while (System.nanoTime() - giveUp < 0) {
        Option<Redlock.Grant> grant = redlock.tryLock(lockName, ttl);
        if (grant.isDefined()) {
          long validity = grant.get().validUntilNanos() - System.nanoTime();
          Deadline deadline =
              Deadline.forHolder(
                  LeaseClock.system(), System.nanoTime(), Duration.ofNanos(validity));
          deadline.checkPointOfNoReturn(Duration.ofMillis(100), Duration.ofMillis(50));
          return new Lease(lockName, owner, grant.get().token(), deadline);
        }
        // Retry after a short random delay, as Redlock prescribes; this is a backoff.
        LockSupport.parkNanos((long) (50_000_000 * Math.random()) + 10_000_000);
      }
      throw new IllegalStateException("no Redlock majority within " + maxWait);
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
      redlock.close();
    }
  }

  @Override
  protected Class<? extends PausableHolder> holderType() {
    return Holder.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(PORTS, ports, URL, jdbcUrl);
  }

  @Override
  protected PausableHolder newHolder() {
    return new Holder(ports, jdbcUrl);
  }

  @Override
  protected String label() {
    return "Redlock";
  }

  @Override
  protected int pausedHolders() {
    return 1;
  }

  @Override
  protected int fencedRuns() {
    return 1;
  }
}
