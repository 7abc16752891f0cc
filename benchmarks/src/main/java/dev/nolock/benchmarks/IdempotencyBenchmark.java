package dev.nolock.benchmarks;

import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.ResultCodec;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
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

/**
 * Execute an action once per idempotency key. The action records its effect by inserting a row into
 * the caller's own table {@code effects} in the transaction that stores the result. One attempt per
 * invocation: {@code ok} is a call that did the work ({@code Completed}) or correctly answered from
 * the stored result ({@code Replayed}); {@code conflict} is any other answer ({@code
 * RequestInProgress}, a stale attempt).
 *
 * <p>{@code keys} does not pick among existing rows here; it chooses the path:
 *
 * <ul>
 *   <li>{@code keys=1}: every call uses the same key, so after the first call of the trial each
 *       call is a <b>replay</b> (the claim finds the key completed, then the stored result is
 *       read), all threads on one hot row.
 *   <li>{@code keys=10000}: every call uses a <b>fresh</b> key never seen before, so each is a
 *       <b>first execution</b>: the claim, the action's insert and the conditional store of the
 *       result.
 * </ul>
 *
 * Variants:
 *
 * <ul>
 *   <li>{@code idempotencyKeys}: nolock's {@code IdempotencyKeys.execute(scope, caller, key,
 *       fingerprint, action)}, default config, the UTF-8 codec.
 *   <li>{@code idempotencyRawJdbc}: the floor, the library's statements through plain JDBC, in the
 *       same transactions, each on a connection of its own from the pool as the library takes them:
 *       (1) {@code BEGIN}; the claim {@code INSERT ... VALUES (..., nextval(seq), ...) ON CONFLICT
 *       (scope, principal, idempotency_key) DO UPDATE ... WHERE k.state = 'in_progress' AND
 *       k.locked_until <= clock_timestamp() AND k.fingerprint = excluded.fingerprint RETURNING
 *       attempt_token, ...}; {@code COMMIT}. (2a) Claimed: {@code BEGIN}; the action's insert;
 *       {@code UPDATE ... SET state = 'completed', response_body = ? ... WHERE scope = ? AND
 *       principal = ? AND idempotency_key = ? AND attempt_token = ? AND state = 'in_progress'};
 *       {@code COMMIT}. (2b) Not claimed: {@code BEGIN}; {@code SELECT fingerprint, state,
 *       response_status, response_body, locked_until, clock_timestamp() ...}; {@code COMMIT};
 *       decode the stored body.
 * </ul>
 *
 * Fair because the SQL text is the library's (as jOOQ renders it), with the same transactions,
 * round trips and query timeout (the library's on its own statements, none on the action's). The
 * action's insert is the same JDBC code in both variants (through {@code attempt.dsl()}'s
 * connection in the library's), so the difference is the library alone.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class IdempotencyBenchmark {

  static final String SCOPE = "bench.execute";
  static final Fingerprint FINGERPRINT = Fingerprint.of("POST /bench");
  static final String RESULT = "done";

  /** The principal of {@link Caller#anonymous()}, as the keys table stores it. */
  static final String ANONYMOUS = Caller.anonymous().principal();

  static final long LEASE_MILLIS = IdempotencyConfig.DEFAULT_LEASE.toMillis();

  /** The library's default per-statement timeout, set on the floor's copies of its statements. */
  static final int QUERY_TIMEOUT_SECONDS =
      Math.toIntExact(IdempotencyConfig.ofDefaults().queryTimeout().toSeconds());

  static final long RETENTION_MILLIS = IdempotencyConfig.DEFAULT_RETENTION.toMillis();

  private static final String INTERVAL_MS =
      "cast(interval '0 years 0 mons 0 days 0 hours 0 mins 0.001 secs' as interval day to second)";

  /**
   * {@code KeyTable.claim} as jOOQ renders it, takeover included ({@code
   * IdempotencyBenchmarkSqlTest} compares them). Binds: scope, principal, key, fingerprint,
   * downstream key, retention (ms), lease (ms).
   */
  static final String CLAIM =
      "insert into \"nolock_idempotency_keys\" as \"k\" (\"scope\", \"principal\","
          + " \"idempotency_key\", \"fingerprint\", \"state\", \"downstream_key\","
          + " \"attempt_token\", \"recovery_point\", \"created_at\", \"expires_at\","
          + " \"attempt_count\", \"locked_until\") values (?, ?, ?, ?, 'in_progress',"
          + " cast(? as uuid), nextval('\"nolock_idempotency_keys_attempt_seq\"'), 'started',"
          + " clock_timestamp(), (clock_timestamp() + (? * "
          + INTERVAL_MS
          + ")), 1, (clock_timestamp() + (? * "
          + INTERVAL_MS
          + "))) on conflict (\"scope\", \"principal\", \"idempotency_key\") do update set"
          + " \"attempt_token\" = excluded.\"attempt_token\", \"expires_at\" ="
          + " greatest(\"k\".\"expires_at\", excluded.\"expires_at\"), \"attempt_count\" ="
          + " (\"k\".\"attempt_count\" + 1), \"locked_until\" = excluded.\"locked_until\" where"
          + " (\"k\".\"locked_until\" <= clock_timestamp() and \"k\".\"state\" = 'in_progress'"
          + " and \"k\".\"fingerprint\" = excluded.\"fingerprint\") returning \"attempt_token\","
          + " \"attempt_count\", \"recovery_point\", \"downstream_key\"";

  /** {@code KeyTable.read} as jOOQ renders it. */
  static final String READ =
      "select \"fingerprint\", \"state\", \"response_status\", \"response_body\","
          + " \"locked_until\", clock_timestamp() from \"nolock_idempotency_keys\" where"
          + " (\"scope\" = ? and \"principal\" = ? and \"idempotency_key\" = ?)";

  /** {@code KeyTable.complete} as jOOQ renders it. */
  static final String STORE =
      "update \"nolock_idempotency_keys\" set \"state\" = 'completed', \"recovery_point\" ="
          + " 'finished', \"response_status\" = ?, \"response_body\" = ?, \"completed_at\" ="
          + " clock_timestamp(), \"locked_until\" = clock_timestamp(), \"expires_at\" ="
          + " (clock_timestamp() + (? * "
          + INTERVAL_MS
          + ")) where (\"scope\" = ? and \"principal\" = ? and \"idempotency_key\" = ? and"
          + " \"attempt_token\" = ? and"
          + " \"state\" = 'in_progress')";

  /** The caller's own write, the action's effect. */
  static final String EFFECT = "INSERT INTO effects (idem_key) VALUES (?)";

  /** 1: every call replays one key; 10000: every call is a first execution of a fresh key. */
  @Param({"1", "10000"})
  public int keys;

  private Bench.PgSchema schema;
  private IdempotencyKeys<String> idempotency;
  private final AtomicLong fresh = new AtomicLong();

  @Setup(Level.Trial)
  public void setUp(BenchmarkParams params) {
    schema = Bench.freshSchema(params.getThreads());
    idempotency =
        IdempotencyKeys.create(
            schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8());
    idempotency.createTableIfMissing();
    schema.execute("CREATE TABLE effects (idem_key varchar(255) PRIMARY KEY)");
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    schema.close();
  }

  private String nextKey() {
    return keys == 1 ? "hot" : "k" + fresh.incrementAndGet();
  }

  @Benchmark
  public void idempotencyKeys(Outcomes outcomes) {
    Outcome<String> outcome =
        idempotency.execute(
            SCOPE,
            Caller.anonymous(),
            nextKey(),
            FINGERPRINT,
            attempt -> {
              attempt
                  .dsl()
                  .connection(
                      connection -> {
                        try (PreparedStatement effect = connection.prepareStatement(EFFECT)) {
                          effect.setString(1, attempt.key());
                          effect.executeUpdate();
                        }
                      });
              return RESULT;
            });
    outcomes.of(outcome instanceof Outcome.Completed || outcome instanceof Outcome.Replayed);
  }

  @Benchmark
  public void idempotencyRawJdbc(Outcomes outcomes) throws SQLException {
    String key = nextKey();
    long token = -1;
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      try (PreparedStatement claim = connection.prepareStatement(CLAIM)) {
        claim.setQueryTimeout(QUERY_TIMEOUT_SECONDS);
        claim.setString(1, SCOPE);
        claim.setString(2, ANONYMOUS);
        claim.setString(3, key);
        claim.setString(4, FINGERPRINT.value());
        claim.setObject(5, UUID.randomUUID());
        claim.setLong(6, RETENTION_MILLIS);
        claim.setLong(7, LEASE_MILLIS);
        try (ResultSet row = claim.executeQuery()) {
          if (row.next()) {
            token = row.getLong(1);
            row.getInt(2);
            row.getString(3);
            row.getObject(4, UUID.class);
          }
        }
      }
      connection.commit();
      connection.setAutoCommit(true);
    }
    if (token >= 0) {
      outcomes.of(runAndStore(key, token));
    } else {
      outcomes.of(replay(key));
    }
  }

  /** The action's write and the store of the result, committed only if the token still holds. */
  private boolean runAndStore(String key, long token) throws SQLException {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      try (PreparedStatement effect = connection.prepareStatement(EFFECT);
          PreparedStatement store = connection.prepareStatement(STORE)) {
        effect.setString(1, key);
        effect.executeUpdate();
        store.setQueryTimeout(QUERY_TIMEOUT_SECONDS);
        store.setInt(1, 0);
        store.setBytes(2, RESULT.getBytes(StandardCharsets.UTF_8));
        store.setLong(3, RETENTION_MILLIS);
        store.setString(4, SCOPE);
        store.setString(5, ANONYMOUS);
        store.setString(6, key);
        store.setLong(7, token);
        if (store.executeUpdate() != 1) {
          connection.rollback();
          return false;
        }
        connection.commit();
        return true;
      } finally {
        connection.setAutoCommit(true);
      }
    }
  }

  /** The key was not claimed: a replay when it completed with this fingerprint. */
  private boolean replay(String key) throws SQLException {
    try (Connection connection = schema.dataSource().getConnection()) {
      connection.setAutoCommit(false);
      boolean replayed = false;
      try (PreparedStatement read = connection.prepareStatement(READ)) {
        read.setQueryTimeout(QUERY_TIMEOUT_SECONDS);
        read.setString(1, SCOPE);
        read.setString(2, ANONYMOUS);
        read.setString(3, key);
        try (ResultSet row = read.executeQuery()) {
          if (row.next()
              && FINGERPRINT.value().equals(row.getString(1))
              && "completed".equals(row.getString(2))) {
            row.getInt(3);
            replayed = new String(row.getBytes(4), StandardCharsets.UTF_8).equals(RESULT);
            row.getObject(5, java.time.OffsetDateTime.class);
            row.getObject(6, java.time.OffsetDateTime.class);
          }
        }
      }
      connection.commit();
      connection.setAutoCommit(true);
      return replayed;
    }
  }
}
