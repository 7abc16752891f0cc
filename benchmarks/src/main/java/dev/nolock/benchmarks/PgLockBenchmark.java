package dev.nolock.benchmarks;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.postgres.PostgresAdvisoryLock;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.lock.postgres.PostgresLockConfig;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.Fence;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import javax.sql.DataSource;
import net.javacrumbs.shedlock.core.ClockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.provider.jdbctemplate.JdbcTemplateLockProvider;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.springframework.jdbc.core.JdbcTemplate;

/**
 * Increment a counter for a key under a PostgreSQL lock: try the lock once (never wait), and if it
 * was granted run {@code UPDATE counters SET value = value + 1 WHERE id = ?} as the protected work,
 * then release. One attempt per invocation; a lock held by another thread is a conflict, not
 * retried. The lock name of key {@code i} is {@code counter-i}, for every variant.
 *
 * <ul>
 *   <li>{@code lockPostgresFenced}: nolock's fenced lock, {@code FencedLock} ({@code CORRECTNESS})
 *       over {@code PostgresLockBackend}, five round trips per success:
 *       <ol>
 *         <li>{@code tryAcquire(name, 10 s)}: {@code INSERT INTO nolock_locks ... ON CONFLICT
 *             (name) DO UPDATE ... WHERE l.expires_at <= clock_timestamp() RETURNING token},
 *             autocommit; no row is a conflict.
 *         <li>{@code checkPointOfNoReturn} (local, no I/O), then {@code Fence.write} without a
 *             write id (the benchmark never retries a write, so it records none): in one
 *             transaction the fence upsert {@code INSERT INTO nolock_fences ... ON CONFLICT ...
 *             WHERE f.token < excluded.token OR ...} for the lease's token, the counter {@code
 *             UPDATE}, {@code COMMIT}.
 *         <li>Close the {@code HeldLock}: the conditional release {@code UPDATE nolock_locks SET
 *             expires_at = clock_timestamp() WHERE name, owner, token match}, autocommit, in one
 *             statement with the look into the queue of waiters that notifies the first one (here
 *             nobody waits: {@code tryAcquire} never queues); it also cancels the watchdog's
 *             renewal and expiry timers scheduled at the grant.
 *       </ol>
 *   <li>{@code lockPostgresRawJdbc}: its floor, the same three steps with the statements exactly as
 *       jOOQ renders them for the library (captured through a logging {@code DataSource}), through
 *       plain JDBC on one connection of the same pool: the same round trips and commits, and the
 *       backend's query timeout on the acquire and the release as the backend sets it (the fence
 *       has none in either), without jOOQ, the facade's watchdog timers or validation.
 *   <li>{@code lockShedLockJdbc}: the peer, ShedLock's {@code JdbcTemplateLockProvider} on the same
 *       pool, configured as ShedLock's README recommends ({@code usingDbTime()}, so the lock times
 *       come from the database clock). {@code lock(name, lockAtMostFor 10 s, lockAtLeastFor 0)}:
 *       {@code INSERT ... ON CONFLICT (name) DO UPDATE ... WHERE lock_until <= now} the first time
 *       it sees a name, {@code UPDATE shedlock ... WHERE name = ? AND lock_until <= now} after
 *       that; if granted, the counter {@code UPDATE} in autocommit, then {@code unlock()}: {@code
 *       UPDATE shedlock SET lock_until = ... WHERE name = ?}. The provider runs each of its
 *       statements in a Spring transaction of its own ({@code REQUIRES_NEW}, a {@code COMMIT} after
 *       it), as it does in every application that uses it.
 *   <li>{@code advisoryXactLock}: nolock's {@code PostgresAdvisoryLock.tryInTransaction}, one
 *       transaction: {@code SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0))} with the name
 *       in nolock's namespace ({@code "nolock.lock:counter-i"}), the counter {@code UPDATE} if
 *       true, {@code COMMIT} (also when false: the empty transaction ends).
 *   <li>{@code advisoryRawJdbc}: its floor, the same statements with the same key string (framed
 *       once at setup, hashed by the server the same way) through plain JDBC on the same pool.
 * </ul>
 *
 * <p>Why the peer comparison is fair, and what it does not say: ShedLock does not fence. It hands
 * out no token, so a holder paused past {@code lockAtMostFor} can still write after the next holder
 * has. The comparison is therefore of lock cycles with the same counter {@code UPDATE} as the work;
 * the fenced design does more per cycle (the fence check in the same transaction as the work, two
 * more round trips) and that is the price of refusing a stale holder's write. The advisory lock
 * needs no fence because the lock and the work share one transaction.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class PgLockBenchmark {

  /** 1 is the hot key; 10000 spreads the locks. */
  @Param({"1", "10000"})
  public int keys;

  private static final Duration TTL = Duration.ofSeconds(10);
  private static final String WORK = "UPDATE counters SET value = value + 1 WHERE id = ?";

  // The statements below are what jOOQ 3.19 renders for PostgresLockBackend, Fence and
  // PostgresAdvisoryLock, verbatim, so the server parses and plans the same text for both.
  // PgLockBenchmarkSqlTest holds FENCE to what Fence.write renders, TRY_XACT_LOCK and its key to
  // what PostgresAdvisoryLock sends.
  static final String ACQUIRE =
      "insert into \"nolock_locks\" as \"l\" (\"name\", \"owner\", \"token\", \"expires_at\")"
          + " values (?, ?, 1, (clock_timestamp() + (? * cast(interval '0 years 0 mons 0 days 0"
          + " hours 0 mins 0.001 secs' as interval day to second)))) on conflict (\"name\") do"
          + " update set \"owner\" = excluded.\"owner\", \"token\" = (\"l\".\"token\" + 1),"
          + " \"expires_at\" = excluded.\"expires_at\" where \"l\".\"expires_at\" <="
          + " clock_timestamp() returning \"token\"";
  static final String FENCE =
      "insert into \"nolock_fences\" as \"f\" (\"name\", \"token\", \"owner\") values (?, ?, ?)"
          + " on conflict (\"name\") do update set \"token\" = excluded.\"token\", \"owner\" ="
          + " excluded.\"owner\" where (\"f\".\"token\" < excluded.\"token\" or (\"f\".\"token\" ="
          + " excluded.\"token\" and \"f\".\"owner\" = excluded.\"owner\"))";
  static final String RELEASE =
      """
      WITH r AS (update "nolock_locks" set "expires_at" = clock_timestamp() where ("name" = ? and\
       "owner" = ? and "token" = ? and "expires_at" > clock_timestamp()) RETURNING 1)
      SELECT (SELECT pg_notify(?, f.waiter) FROM "nolock_locks_waiters" f
      WHERE f.name = ? AND f.waiter <> ? AND f.expires_at > clock_timestamp()
      ORDER BY f.joined_at, f.waiter LIMIT 1) FROM r\
      """;
  static final String TRY_XACT_LOCK = "select pg_try_advisory_xact_lock(hashtextextended(?, 0))";

  /** The lock backend's per-statement timeout (its default, as the design runs it). */
  private static final int LOCK_QUERY_TIMEOUT_SECONDS =
      Math.toIntExact(PostgresLockConfig.ofDefaults().queryTimeout().toSeconds());

  private Bench.PgSchema schema;
  private DataSource dataSource;
  private DSLContext dsl;
  private FencedLock locks;
  private Fence fence;
  private JdbcTemplateLockProvider shedLock;
  private String rawOwner;
  private String[] names;

  /** {@code names} as the advisory lock hashes them, so the floor locks the very same keys. */
  private String[] advisoryInputs;

  @Setup(Level.Trial)
  public void setUp(BenchmarkParams params) {
    setUp(params.getThreads());
  }

  /** Everything but JMH's parameters, so a plain program can drive the variants too. */
  void setUp(int threads) {
    schema = Bench.freshSchema(threads);
    dataSource = schema.dataSource();
    schema.execute("CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL)");
    fillCounters();
    // ShedLock's documented table for PostgreSQL.
    schema.execute(
        "CREATE TABLE shedlock (name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL,"
            + " locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL,"
            + " PRIMARY KEY (name))");
    dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
    PostgresLockBackend backend = PostgresLockBackend.create(dataSource);
    backend.createTableIfMissing();
    fence = Fence.onTable(Fence.DEFAULT_TABLE);
    fence.createTableIfMissing(dsl);
    locks = FencedLock.create(backend, LockConfig.custom(LockPurpose.CORRECTNESS).build());
    // As ShedLock's README recommends: Spring's JdbcTemplate, lock times from the database clock.
    shedLock =
        new JdbcTemplateLockProvider(
            JdbcTemplateLockProvider.Configuration.builder()
                .withJdbcTemplate(new JdbcTemplate(dataSource))
                .usingDbTime()
                .build());
    // Like the facade's default owner: unique per process, so the fence never mistakes holders.
    rawOwner = "bench-raw-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID();
    names = new String[keys];
    advisoryInputs = new String[keys];
    for (int i = 0; i < keys; i++) {
      names[i] = "counter-" + i;
      advisoryInputs[i] = AdvisoryLockNamespace.LOCK.hashInput(names[i]);
    }
  }

  private void fillCounters() {
    schema.execute(
        "INSERT INTO counters SELECT g, 0 FROM generate_series(0, " + (keys - 1) + ") g");
    schema.execute("ANALYZE counters");
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    TurnWorker.afterTrial(
        () -> {
          locks.close();
          schema.close();
        });
  }

  @Benchmark
  public void lockPostgresFenced(Outcomes outcomes) {
    long id = Bench.pick(keys);
    Option<HeldLock> acquired = locks.tryAcquire(names[(int) id], TTL);
    if (acquired.isEmpty()) {
      outcomes.of(false);
      return;
    }
    try (HeldLock held = acquired.get()) {
      held.checkPointOfNoReturn(Duration.ofMillis(50));
      outcomes.of(fence.write(dsl, held.lease(), tx -> tx.execute(WORK, id)).isRight());
    }
  }

  @Benchmark
  public void lockPostgresRawJdbc(Outcomes outcomes) throws SQLException {
    long id = Bench.pick(keys);
    String name = names[(int) id];
    try (Connection connection = dataSource.getConnection()) {
      long token;
      try (PreparedStatement acquire = connection.prepareStatement(ACQUIRE)) {
        acquire.setQueryTimeout(LOCK_QUERY_TIMEOUT_SECONDS);
        acquire.setString(1, name);
        acquire.setString(2, rawOwner);
        acquire.setLong(3, TTL.toMillis());
        try (ResultSet row = acquire.executeQuery()) {
          if (!row.next()) {
            outcomes.of(false);
            return;
          }
          token = row.getLong(1);
        }
      }
      try {
        outcomes.of(fencedIncrement(connection, name, token, id));
      } finally {
        try (PreparedStatement release = connection.prepareStatement(RELEASE)) {
          release.setQueryTimeout(LOCK_QUERY_TIMEOUT_SECONDS);
          release.setString(1, name);
          release.setString(2, rawOwner);
          release.setLong(3, token);
          // the first waiter, if any, is told of the release (nobody waits here: no notify)
          release.setString(4, PostgresLockConfig.CHANNEL);
          release.setString(5, name);
          release.setString(6, "");
          try (ResultSet freed = release.executeQuery()) {
            freed.next();
          }
        }
      }
    }
  }

  /** The fence upsert and the work in one transaction, as {@code Fence.write} runs them. */
  private boolean fencedIncrement(Connection connection, String name, long token, long id)
      throws SQLException {
    connection.setAutoCommit(false);
    try {
      boolean advanced;
      try (PreparedStatement advance = connection.prepareStatement(FENCE)) {
        advance.setString(1, name);
        advance.setLong(2, token);
        advance.setString(3, rawOwner);
        advanced = advance.executeUpdate() == 1;
      }
      if (advanced) {
        increment(connection, id);
      }
      connection.commit();
      return advanced;
    } catch (SQLException | RuntimeException e) {
      connection.rollback();
      throw e;
    } finally {
      connection.setAutoCommit(true);
    }
  }

  @Benchmark
  public void lockShedLockJdbc(Outcomes outcomes) throws SQLException {
    long id = Bench.pick(keys);
    Optional<SimpleLock> lock =
        shedLock.lock(
            new LockConfiguration(ClockProvider.now(), names[(int) id], TTL, Duration.ZERO));
    if (lock.isEmpty()) {
      outcomes.of(false);
      return;
    }
    try (Connection connection = dataSource.getConnection()) {
      increment(connection, id);
    } finally {
      lock.get().unlock();
    }
    outcomes.of(true);
  }

  @Benchmark
  public void advisoryXactLock(Outcomes outcomes) {
    long id = Bench.pick(keys);
    outcomes.of(
        PostgresAdvisoryLock.tryInTransaction(dsl, names[(int) id], tx -> tx.execute(WORK, id))
            .isDefined());
  }

  @Benchmark
  public void advisoryRawJdbc(Outcomes outcomes) throws SQLException {
    long id = Bench.pick(keys);
    try (Connection connection = dataSource.getConnection()) {
      connection.setAutoCommit(false);
      try {
        boolean locked;
        try (PreparedStatement lock = connection.prepareStatement(TRY_XACT_LOCK)) {
          lock.setString(1, advisoryInputs[(int) id]);
          try (ResultSet row = lock.executeQuery()) {
            row.next();
            locked = row.getBoolean(1);
          }
        }
        if (locked) {
          increment(connection, id);
        }
        // The library commits the empty transaction too when the key is held.
        connection.commit();
        outcomes.of(locked);
      } catch (SQLException | RuntimeException e) {
        connection.rollback();
        throw e;
      } finally {
        connection.setAutoCommit(true);
      }
    }
  }

  private static void increment(Connection connection, long id) throws SQLException {
    try (PreparedStatement work = connection.prepareStatement(WORK)) {
      work.setLong(1, id);
      work.executeUpdate();
    }
  }
}
