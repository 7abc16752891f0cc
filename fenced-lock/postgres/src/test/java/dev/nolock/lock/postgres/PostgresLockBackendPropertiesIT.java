package dev.nolock.lock.postgres;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.LockBackendProperties;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.Supplier;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

/**
 * {@link LockBackendProperties} on the real PostgreSQL: the backend under faults runs over {@link
 * JdbcFaults} (a Hikari pool over a driver that loses a statement's answer or request), the plain
 * one and the peek over an ordinary pool, on a lease table of this class's own.
 *
 * <p>{@code meanwhile} runs when the faulted call has failed and before its caller sees the
 * failure: the backend sends each statement once and pgjdbc never resends, so nothing can happen
 * between the drop and the caller's view that this order misses.
 */
class PostgresLockBackendPropertiesIT extends LockBackendProperties {

  private static final String TABLE =
      "nolock_props_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);

  private static HikariDataSource pool;
  private static JdbcFaults faults;
  private static PostgresLockBackend plain;
  private static LockBackend faulty;
  private static LockRows rows;
  private static final AtomicReference<Pending> pending = new AtomicReference<>();

  private record Pending(InjectedFault fault, Runnable meanwhile) {}

  @BeforeContainer
  static void createTable() {
    String url = Endpoints.fromEnvironment().postgresUrl();
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setMaximumPoolSize(2);
    config.setPoolName("nolock-props-plain");
    pool = new HikariDataSource(config);
    faults = JdbcFaults.pool(url);
    PostgresLockConfig lockConfig = PostgresLockConfig.custom().table(TABLE).build();
    plain = PostgresLockBackend.create(pool, lockConfig);
    plain.createTableIfMissing();
    faulty =
        new MeanwhileAfterTheFault(PostgresLockBackend.create(faults.dataSource(), lockConfig));
    rows = new LockRows(pool, TABLE);
  }

  @AfterContainer
  static void dropTable() throws SQLException {
    try (Connection c = pool.getConnection();
        Statement s = c.createStatement()) {
      s.execute("DROP TABLE IF EXISTS " + TABLE);
    } finally {
      faults.close();
      pool.close();
    }
  }

  @Override
  protected LockBackend backend() {
    return plain;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return rows.peek(name);
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    faults.disarmAll(); // a fault armed for a call that never sent its statement
    InjectedFault fault = faults.onNextStatement(kind, statementOf(op));
    pending.set(new Pending(fault, meanwhile));
    return fault;
  }

  /** ACQUIRE: the upsert; RENEW: the update that adds a TTL; RELEASE: the update that adds none. */
  private static Predicate<String> statementOf(Operation op) {
    return new Predicate<>() {
      @Override
      public boolean test(String sql) {
        String lower = sql.trim().toLowerCase(Locale.ROOT);
        return switch (op) {
          case ACQUIRE -> lower.startsWith("insert");
          case RENEW -> lower.startsWith("update") && lower.contains("interval");
          case RELEASE -> lower.startsWith("with r as (update") && !lower.contains("interval");
        };
      }

      @Override
      public String toString() {
        return "the " + op + " statement";
      }
    };
  }

  /** Runs the pending {@code meanwhile} once its fault fired, before the call returns or throws. */
  private static final class MeanwhileAfterTheFault implements LockBackend {
    private final LockBackend real;

    MeanwhileAfterTheFault(LockBackend real) {
      this.real = real;
    }

    private static <T> T call(Supplier<T> request) {
      try {
        return request.get();
      } finally {
        Pending armed = pending.get();
        if (armed != null && armed.fault().fired() && pending.compareAndSet(armed, null)) {
          armed.meanwhile().run();
        }
      }
    }

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      return call(() -> real.tryAcquire(name, owner, ttl));
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      return call(() -> real.renew(name, owner, token, ttl));
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return call(() -> real.release(name, owner, token));
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return real.holder(name);
    }
  }
}
