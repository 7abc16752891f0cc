package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PgBouncer;
import dev.nolock.testkit.PgBouncerExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Why session-level advisory locks do not work behind a pooler in transaction mode (PgBouncer's <a
 * href="https://www.pgbouncer.org/features.html">feature map</a> lists them as never supported in
 * transaction pooling), run through the real PgBouncer: a session-level advisory lock is held by
 * two clients at once, released by the wrong client, and leaked on a server backend after its
 * client disconnects; the transaction-scoped lock behaves correctly.
 *
 * <p>The session-level cases use PgBouncer's {@code nolock_single} database (one server connection,
 * see scripts/services), so that two clients land on the same server session every time, as they do
 * by chance under load. That is why nolock offers only the transaction-scoped lock ({@link
 * PostgresAdvisoryLock}); it cannot tell from inside a transaction whether a pooler sits in front.
 */
@ExtendWith({PgBouncerExtension.class, PostgresExtension.class})
class SessionAdvisoryLockBehindPgBouncerIT {

  private static final long KEY = 4_242_424_242L;

  private final List<String> timeline = new ArrayList<>();
  private final String singlePoolUrl;
  private final String pooledUrl;
  private final String directUrl;

  SessionAdvisoryLockBehindPgBouncerIT(PgBouncer pgBouncer, PostgresSchema schema) {
    this.pooledUrl = pgBouncer.jdbcUrl();
    assertThat(pooledUrl).contains("/test?");
    this.singlePoolUrl = pooledUrl.replace("/test?", "/nolock_single?");
    this.directUrl = schema.jdbcUrl();
    assertThat(pgBouncer.poolMode()).isEqualTo("transaction");
  }

  @BeforeEach
  @AfterEach
  void freeTheKeyOnTheSharedServerSession() throws SQLException {
    try (Connection c = DriverManager.getConnection(singlePoolUrl);
        Statement s = c.createStatement()) {
      s.execute("select pg_advisory_unlock_all()");
    }
  }

  @Test
  void aSessionLevelLockIsHeldByTwoClientsAtOnce() throws SQLException {
    try (Connection a = DriverManager.getConnection(singlePoolUrl);
        Connection b = DriverManager.getConnection(singlePoolUrl)) {
      boolean aGot = tryLock(a);
      step("client A: pg_try_advisory_lock -> " + aGot);
      boolean bGot = tryLock(b);
      step("client B: pg_try_advisory_lock -> " + bGot + " (same server session: re-entrant)");
      print("two holders");

      assertThat(aGot).isTrue();
      assertThat(bGot).as("B got the lock A holds").isTrue();
    }
  }

  @Test
  void aSessionLevelLockIsReleasedByTheWrongClient() throws SQLException {
    try (Connection a = DriverManager.getConnection(singlePoolUrl);
        Connection b = DriverManager.getConnection(singlePoolUrl);
        Connection direct = DriverManager.getConnection(directUrl)) {
      assertThat(tryLock(a)).isTrue();
      step("client A: pg_try_advisory_lock -> true; A believes it holds the lock");
      boolean released = query(b, "select pg_advisory_unlock(" + KEY + ")");
      step("client B (never locked): pg_advisory_unlock -> " + released);
      boolean otherGot = tryLock(direct);
      step("a direct client: pg_try_advisory_lock -> " + otherGot + " while A still believes");
      print("released by the wrong client");

      assertThat(released).as("B released A's lock").isTrue();
      assertThat(otherGot).isTrue();
    }
  }

  @Test
  void aSessionLevelLockLeaksAfterItsClientDisconnects() throws SQLException {
    try (Connection a = DriverManager.getConnection(singlePoolUrl)) {
      assertThat(tryLock(a)).isTrue();
      step("client A: pg_try_advisory_lock -> true, then disconnects without unlocking");
    }
    try (Connection direct = DriverManager.getConnection(directUrl)) {
      boolean stillHeld =
          query(
              direct,
              "select exists (select 1 from pg_locks where locktype = 'advisory' and granted"
                  + " and ((classid::bigint << 32) | objid::bigint) = "
                  + KEY
                  + ")");
      boolean otherGot = tryLock(direct);
      step("pg_locks after A left: held=" + stillHeld + "; a direct client's try -> " + otherGot);
      print("leaked on the server backend");

      assertThat(stillHeld)
          .as("the lock outlived its client on PgBouncer's server connection")
          .isTrue();
      assertThat(otherGot).isFalse();
    }
  }

  @Test
  void theTransactionScopedLockBehavesCorrectlyThroughPgBouncer() throws SQLException {
    try (Connection a = DriverManager.getConnection(pooledUrl);
        Connection b = DriverManager.getConnection(pooledUrl)) {
      a.setAutoCommit(false);
      b.setAutoCommit(false);
      boolean aGot = query(a, "select pg_try_advisory_xact_lock(" + KEY + ")");
      boolean bGot = query(b, "select pg_try_advisory_xact_lock(" + KEY + ")");
      b.rollback();
      step("in transactions: A -> " + aGot + ", B -> " + bGot);
      a.commit();
      boolean bAfter = query(b, "select pg_try_advisory_xact_lock(" + KEY + ")");
      b.commit();
      step("after A committed: B -> " + bAfter + " (released with A's transaction)");
      print("transaction-scoped lock");

      assertThat(aGot).isTrue();
      assertThat(bGot).isFalse();
      assertThat(bAfter).isTrue();
    }
  }

  private boolean tryLock(Connection c) throws SQLException {
    return query(c, "select pg_try_advisory_lock(" + KEY + ")");
  }

  private static boolean query(Connection c, String sql) throws SQLException {
    try (Statement s = c.createStatement();
        ResultSet r = s.executeQuery(sql)) {
      r.next();
      return r.getBoolean(1);
    }
  }

  private void step(String event) {
    timeline.add(event);
  }

  private void print(String title) {
    System.out.println("PgBouncer transaction pooling, " + title + ":");
    timeline.forEach(e -> System.out.println("  " + e));
  }
}
