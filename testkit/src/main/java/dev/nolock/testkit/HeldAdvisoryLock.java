package dev.nolock.testkit;

import static org.awaitility.Awaitility.await;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.concurrent.Future;

/**
 * A transaction-level advisory lock held by an open transaction on a connection of its own, as
 * another application (or another component) holding the same key would: {@code SELECT
 * pg_advisory_xact_lock(hashtextextended(:input, 0))}, the input bound. It tells whether a call
 * under test waits for it, without sleeping: PostgreSQL's {@code pg_blocking_pids} lists the holder
 * for every backend that waits on a lock it holds.
 *
 * <p>The holder's transaction holds nothing but that key (and its own transaction id), so a backend
 * blocked by it waits for the key. Use a key input no other test uses.
 */
public final class HeldAdvisoryLock implements AutoCloseable {

  private static final Duration WAIT = Duration.ofSeconds(30);

  private final String jdbcUrl;
  private final Connection connection;
  private final int pid;
  private final String what;

  private HeldAdvisoryLock(String jdbcUrl, Connection connection, int pid, String what) {
    this.jdbcUrl = jdbcUrl;
    this.connection = connection;
    this.pid = pid;
    this.what = what;
  }

  /** Takes locks on a connection whose transaction is open (autocommit off). */
  @FunctionalInterface
  public interface LockTaker {
    void take(Connection connection) throws SQLException;
  }

  /**
   * Opens a connection to {@code jdbcUrl}, begins a transaction and takes the advisory lock on
   * {@code hashtextextended(input, 0)} in it; the lock lasts until {@link #close()}.
   */
  public static HeldAdvisoryLock hold(String jdbcUrl, String input) throws SQLException {
    return holdBy(
        jdbcUrl,
        "the advisory lock on \"" + input + "\"",
        connection -> {
          try (PreparedStatement lock =
              connection.prepareStatement("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))")) {
            lock.setString(1, input);
            lock.executeQuery().close();
          }
        });
  }

  /**
   * Opens a connection to {@code jdbcUrl}, begins a transaction and lets {@code taker} take the
   * locks the code under test takes (e.g. its own statement for a key computed by the server); they
   * last until {@link #close()}. The transaction must hold nothing else another backend could wait
   * for.
   *
   * @param what the locks, for the wait's message
   */
  public static HeldAdvisoryLock holdBy(String jdbcUrl, String what, LockTaker taker)
      throws SQLException {
    Connection connection = DriverManager.getConnection(jdbcUrl);
    try {
      connection.setAutoCommit(false);
      taker.take(connection);
      try (PreparedStatement self = connection.prepareStatement("SELECT pg_backend_pid()");
          ResultSet row = self.executeQuery()) {
        row.next();
        return new HeldAdvisoryLock(jdbcUrl, connection, row.getInt(1), what);
      }
    } catch (SQLException | RuntimeException e) {
      connection.close();
      throw e;
    }
  }

  /**
   * Waits until {@code call} has returned or some backend waits for a lock this holder holds, and
   * tells which: true when a backend is blocked by the holder (the call waits for the key), false
   * when the call returned without being blocked.
   */
  public boolean blocks(Future<?> call) throws SQLException {
    await("the call returns or waits for " + what)
        .atMost(WAIT)
        .until(() -> call.isDone() || blockedBackends() > 0);
    return blockedBackends() > 0;
  }

  private int blockedBackends() throws SQLException {
    // Not on the holder's connection: inside its transaction pg_stat_activity is a snapshot taken
    // at the first read, which would never show a backend that started waiting later.
    try (Connection observer = DriverManager.getConnection(jdbcUrl);
        PreparedStatement count =
            observer.prepareStatement(
                "SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))")) {
      count.setInt(1, pid);
      try (ResultSet row = count.executeQuery()) {
        row.next();
        return row.getInt(1);
      }
    }
  }

  /** Ends the transaction (rolled back), which releases the lock, and closes the connection. */
  @Override
  public void close() throws SQLException {
    try {
      connection.rollback();
    } finally {
      connection.close();
    }
  }
}
