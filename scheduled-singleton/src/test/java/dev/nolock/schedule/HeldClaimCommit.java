package dev.nolock.schedule;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;

/**
 * A data source (one new connection per request, autocommit off, so every transaction ends with an
 * explicit {@code COMMIT}) that holds the {@code COMMIT} of the first transaction that sent an
 * {@code INSERT} (a claim) once armed, with the transaction open on the server, its row and its
 * locks held, until {@link #release()}:
 *
 * <ul>
 *   <li>{@link Mode#HOLD}: the caller waits in {@code commit()} until the release, then commits.
 *   <li>{@link Mode#LOSE_ANSWER}: the caller is told at once that the connection failed (SQLState
 *       08006, as a dropped connection), while the {@code COMMIT} is still on its way: it reaches
 *       the server at the release, from another thread.
 * </ul>
 */
final class HeldClaimCommit {

  private static final long WAIT_SECONDS = 30;

  enum Mode {
    HOLD,
    LOSE_ANSWER
  }

  /** Counted down when the armed commit is held. */
  final CountDownLatch held = new CountDownLatch(1);

  /** Counted down when the held commit reached the server and returned. */
  final CountDownLatch committed = new CountDownLatch(1);

  /** The server process of the held transaction. */
  volatile int heldPid;

  private final CountDownLatch release = new CountDownLatch(1);
  private final AtomicReference<Mode> armed = new AtomicReference<>();
  private final String jdbcUrl;

  HeldClaimCommit(String jdbcUrl) {
    this.jdbcUrl = jdbcUrl;
  }

  /** Holds the next claim's commit. */
  HeldClaimCommit arm(Mode mode) {
    armed.set(mode);
    return this;
  }

  void release() {
    release.countDown();
  }

  void awaitCommitted() throws InterruptedException {
    if (!committed.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
      throw new AssertionError("the held commit did not complete within " + WAIT_SECONDS + " s");
    }
  }

  DataSource dataSource() {
    return proxy(
        DataSource.class,
        (p, m, args) -> {
          if (m.getName().equals("getConnection")) {
            Connection c = DriverManager.getConnection(jdbcUrl);
            c.setAutoCommit(false);
            return connection(c);
          }
          if (m.getName().equals("getLoginTimeout")) {
            return 0;
          }
          if (m.getName().equals("isWrapperFor")) {
            return false;
          }
          throw new UnsupportedOperationException(m.getName());
        });
  }

  private Connection connection(Connection real) {
    boolean[] inserted = {false};
    boolean[] broken = {false};
    return proxy(
        Connection.class,
        (p, m, args) -> {
          String name = m.getName();
          if (broken[0]) {
            if (name.equals("close") || name.equals("isClosed")) {
              return name.equals("isClosed") ? Boolean.TRUE : null;
            }
            throw new SQLException("the connection failed (test)", "08006");
          }
          if ((name.equals("prepareStatement") || name.equals("createStatement"))
              && args != null
              && args[0] instanceof String sql
              && sql.toLowerCase(Locale.ROOT).contains("insert into")) {
            inserted[0] = true;
          }
          if (name.equals("commit") && inserted[0]) {
            Mode mode = armed.getAndSet(null);
            if (mode != null) {
              try (var st = real.createStatement();
                  var rs = st.executeQuery("SELECT pg_backend_pid()")) {
                rs.next();
                heldPid = rs.getInt(1);
              }
            }
            if (mode == Mode.HOLD) {
              held.countDown();
              await(release);
              Object result = call(real, m, args);
              committed.countDown();
              return result;
            }
            if (mode == Mode.LOSE_ANSWER) {
              broken[0] = true;
              Thread commit =
                  new Thread(
                      () -> {
                        try {
                          await(release);
                          real.commit();
                          real.close();
                          committed.countDown();
                        } catch (SQLException e) {
                          throw new IllegalStateException(e);
                        }
                      },
                      "held-claim-commit");
              commit.setDaemon(true);
              commit.start();
              held.countDown();
              throw new SQLException("the answer to COMMIT was lost (test)", "08006");
            }
          }
          if (name.equals("commit") || name.equals("rollback")) {
            inserted[0] = false;
          }
          return call(real, m, args);
        });
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
        throw new AssertionError("not released within " + Duration.ofSeconds(WAIT_SECONDS));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  private static Object call(Object target, Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @SuppressWarnings("unchecked")
  private static <T> T proxy(Class<T> type, InvocationHandler handler) {
    return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler);
  }
}
