package dev.nolock.testkit;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.PrintWriter;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.CallableStatement;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.Statement;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * A HikariCP pool over a PostgreSQL driver whose connections a test breaks on purpose, to inject
 * the ambiguous faults of JDBC against the real server: a statement or a {@code COMMIT} that the
 * server executed while its answer was lost ({@link FaultKind#ANSWER_LOST}), or a connection that
 * dropped before the server saw it ({@link FaultKind#REQUEST_LOST}).
 *
 * <p>What the code under test sees is what a dropped connection gives it: an {@link SQLException}
 * with SQLState {@code 08006} (connection failure), after which the physical connection is closed.
 * The fault sits below the pool, so HikariCP evicts the connection as it would a real broken one,
 * and nothing above the driver (jOOQ, the library, the caller's retry) is bypassed.
 *
 * <ul>
 *   <li>{@link #onNextStatement}: in autocommit the statement is durable before the call fails,
 *       which is the lost answer of a single-statement write; inside a transaction the closed
 *       connection rolls the transaction back, so lose the {@code COMMIT} instead.
 *   <li>{@link #onNextCommit}: the transaction committed on the server; the caller cannot tell.
 *   <li>{@link #onNextTransactionEnd}: the same for whichever of {@code COMMIT} and {@code
 *       ROLLBACK} comes first, for code that decides by what it found (a conditional update that
 *       matched no row rolls back) and whose last request is to be lost either way.
 * </ul>
 *
 * Each armed fault fires once, on the first request it matches; assert {@link
 * InjectedFault#assertFired()}. Needs {@code org.postgresql:postgresql}, {@code
 * com.zaxxer:HikariCP} (and {@code org.jooq:jooq} for {@link #dsl()}) on the test classpath.
 *
 * <pre>{@code
 * try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
 *   InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);
 *   assertThatThrownBy(() -> store.write(...)).isInstanceOf(BackendUnavailableException.class);
 *   fault.assertFired();
 * }
 * }</pre>
 */
// Written by hand: the proxies of datasource-proxy and p6spy observe statements but cannot run one
// on the server and then fail the call as a dropped connection would.
public final class JdbcFaults implements AutoCloseable {

  /** The SQLState pgjdbc gives a connection that failed mid-request. */
  public static final String CONNECTION_FAILURE = "08006";

  private static final String COMMIT = "COMMIT";
  private static final String ROLLBACK = "ROLLBACK";

  private static final AtomicInteger POOLS = new AtomicInteger();

  private final List<Armed> armed = new CopyOnWriteArrayList<>();
  private final HikariDataSource pool;
  private volatile DSLContext dsl;

  private JdbcFaults(String jdbcUrl) {
    HikariConfig config = new HikariConfig();
    config.setDataSource(new FaultyDriver(jdbcUrl));
    config.setPoolName("nolock-faults-" + POOLS.incrementAndGet());
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    config.setConnectionTimeout(10_000);
    this.pool = new HikariDataSource(config);
  }

  /** A pool of at most 4 connections to {@code jdbcUrl}, e.g. {@link PostgresSchema#jdbcUrl()}. */
  public static JdbcFaults pool(String jdbcUrl) {
    return new JdbcFaults(Objects.requireNonNull(jdbcUrl, "jdbcUrl"));
  }

  /** The pool: hand it to the code under test. */
  public DataSource dataSource() {
    return pool;
  }

  /** jOOQ with {@code SQLDialect.POSTGRES} over {@link #dataSource()}. */
  public DSLContext dsl() {
    DSLContext current = dsl;
    if (current == null) {
      current = DSL.using(pool, SQLDialect.POSTGRES);
      dsl = current;
    }
    return current;
  }

  /** Matches SQL that contains {@code fragment}, ignoring case: {@code sqlContaining("update")}. */
  public static Predicate<String> sqlContaining(String fragment) {
    String lower = fragment.toLowerCase(Locale.ROOT);
    return new Predicate<>() {
      @Override
      public boolean test(String sql) {
        return sql.toLowerCase(Locale.ROOT).contains(lower);
      }

      @Override
      public String toString() {
        return "SQL containing \"" + fragment + "\"";
      }
    };
  }

  /**
   * Arms a fault on the next statement (on any connection of the pool) whose SQL matches.
   *
   * @param kind {@link FaultKind#ANSWER_LOST}: the server executes it, then the call fails and the
   *     connection closes; {@link FaultKind#REQUEST_LOST}: the call fails and the connection closes
   *     before the statement is sent
   */
  public InjectedFault onNextStatement(FaultKind kind, Predicate<String> sql) {
    return onNextStatement(kind, sql, () -> {});
  }

  /**
   * Like {@link #onNextStatement(FaultKind, Predicate)}, and runs {@code meanwhile} when the fault
   * fires: after the server executed the statement ({@link FaultKind#ANSWER_LOST}) or instead of it
   * ({@link FaultKind#REQUEST_LOST}), once the connection is closed, and before the caller sees the
   * failure. It runs on the calling thread, which is the place of another writer's request that
   * lands between a lost answer and the caller's next move; it must use another pool (a statement
   * of this pool from inside the action could match a fault of its own).
   */
  public InjectedFault onNextStatement(FaultKind kind, Predicate<String> sql, Runnable meanwhile) {
    return arm(
        new Armed(
            false,
            kind,
            Objects.requireNonNull(sql, "sql"),
            "statement: " + sql,
            Objects.requireNonNull(meanwhile, "meanwhile")));
  }

  /** Arms a fault on the next {@code COMMIT} ({@link Connection#commit()}) of the pool. */
  public InjectedFault onNextCommit(FaultKind kind) {
    return arm(new Armed(true, kind, COMMIT::equals, COMMIT, () -> {}));
  }

  /**
   * Arms a fault on the {@code COMMIT} ({@link Connection#commit()}) of the next transaction of the
   * pool that sent a statement whose SQL matches {@code sentInTransaction}: the commit of one
   * particular transaction when the code under test commits others before it.
   */
  public InjectedFault onNextCommit(FaultKind kind, Predicate<String> sentInTransaction) {
    Objects.requireNonNull(sentInTransaction, "sentInTransaction");
    Armed fault =
        new Armed(true, kind, COMMIT::equals, COMMIT + " after " + sentInTransaction, () -> {});
    fault.sentInTransaction = sentInTransaction;
    return arm(fault);
  }

  /**
   * Arms a fault on the request that ends the next transaction of the pool: its {@code COMMIT}
   * ({@link Connection#commit()}) or its {@code ROLLBACK} ({@link Connection#rollback()}),
   * whichever comes first. {@link FaultKind#ANSWER_LOST} on a {@code ROLLBACK}: the server rolled
   * back, the call fails as a dropped connection would.
   */
  public InjectedFault onNextTransactionEnd(FaultKind kind) {
    return arm(new Armed(true, kind, end -> true, COMMIT + " or " + ROLLBACK, () -> {}));
  }

  /** Disarms every fault that has not fired yet. */
  public void disarmAll() {
    armed.clear();
  }

  @Override
  public void close() {
    pool.close();
  }

  private InjectedFault arm(Armed fault) {
    armed.add(fault);
    return fault;
  }

  /**
   * The first armed fault that matches, removed and marked fired; null when none matches. {@code
   * end}: {@code sql} names the request that ends a transaction ("COMMIT" or "ROLLBACK").
   */
  private Armed fire(boolean end, String sql, List<String> sentInTransaction) {
    for (Armed fault : armed) {
      if (fault.end == end
          && fault.sql.test(sql)
          && (fault.sentInTransaction == null
              || sentInTransaction.stream().anyMatch(fault.sentInTransaction))
          && fault.fired.compareAndSet(false, true)) {
        armed.remove(fault);
        return fault;
      }
    }
    return null;
  }

  private static final class Armed implements InjectedFault {
    final boolean end;
    final FaultKind kind;
    final Predicate<String> sql;
    final String target;
    final Runnable meanwhile;
    final AtomicBoolean fired = new AtomicBoolean();

    /** For a {@code COMMIT}: a statement its transaction must have sent; null for any. */
    volatile Predicate<String> sentInTransaction;

    Armed(boolean end, FaultKind kind, Predicate<String> sql, String target, Runnable meanwhile) {
      this.end = end;
      this.kind = Objects.requireNonNull(kind, "kind");
      this.sql = sql;
      this.target = target;
      this.meanwhile = meanwhile;
    }

    @Override
    public boolean fired() {
      return fired.get();
    }

    @Override
    public String toString() {
      return "JdbcFaults " + kind + " on the next " + target;
    }
  }

  /** Opens real pgjdbc connections and hands out proxies that can break them. */
  private final class FaultyDriver implements DataSource {
    private final String url;

    FaultyDriver(String url) {
      this.url = url;
    }

    @Override
    public Connection getConnection() throws SQLException {
      Properties properties = PostgresExtension.timeouts();
      ConnectionHandler handler =
          new ConnectionHandler(DriverManager.getConnection(url, properties));
      handler.self = proxy(Connection.class, handler);
      return handler.self;
    }

    @Override
    public Connection getConnection(String user, String password) {
      throw new UnsupportedOperationException("the user comes from the JDBC URL");
    }

    @Override
    public PrintWriter getLogWriter() {
      return null;
    }

    @Override
    public void setLogWriter(PrintWriter out) {}

    @Override
    public void setLoginTimeout(int seconds) {}

    @Override
    public int getLoginTimeout() {
      return 0;
    }

    @Override
    public Logger getParentLogger() throws SQLFeatureNotSupportedException {
      throw new SQLFeatureNotSupportedException();
    }

    @Override
    public <T> T unwrap(Class<T> type) throws SQLException {
      throw new SQLException("not a wrapper");
    }

    @Override
    public boolean isWrapperFor(Class<?> type) {
      return false;
    }
  }

  private final class ConnectionHandler implements InvocationHandler {
    private final Connection real;
    private volatile Connection self;

    /** The SQL sent since the transaction began (since autocommit was turned off, or its end). */
    final List<String> sentInTransaction = new CopyOnWriteArrayList<>();

    ConnectionHandler(Connection real) {
      this.real = real;
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
      String name = method.getName();
      boolean rollback = name.equals("rollback") && (args == null || args.length == 0);
      if (name.equals("commit") || rollback || name.equals("setAutoCommit")) {
        List<String> sent = List.copyOf(sentInTransaction);
        sentInTransaction.clear();
        if (!name.equals("setAutoCommit")) {
          Armed fault = fire(true, rollback ? ROLLBACK : COMMIT, sent);
          if (fault != null) {
            return breakConnection(real, fault, () -> call(real, method, args));
          }
        }
      }
      Object result = call(real, method, args);
      if (result instanceof Statement statement
          && (name.equals("prepareStatement")
              || name.equals("prepareCall")
              || name.equals("createStatement"))) {
        String sql = args != null && args.length > 0 && args[0] instanceof String s ? s : null;
        Class<? extends Statement> type =
            statement instanceof CallableStatement
                ? CallableStatement.class
                : statement instanceof PreparedStatement
                    ? PreparedStatement.class
                    : Statement.class;
        return proxy(type, new StatementHandler(this, self, statement, sql));
      }
      return result;
    }
  }

  private final class StatementHandler implements InvocationHandler {
    private final ConnectionHandler connection;
    private final Connection realConnection;
    private final Connection proxyConnection;
    private final Statement real;
    private final String preparedSql;

    StatementHandler(
        ConnectionHandler connection, Connection proxyConnection, Statement real, String sql) {
      this.connection = connection;
      this.realConnection = connection.real;
      this.proxyConnection = proxyConnection;
      this.real = real;
      this.preparedSql = sql;
    }

    @Override
    public Object invoke(Object proxy, Method method, Object[] args) throws Throwable {
      String name = method.getName();
      if (name.equals("getConnection")) {
        return proxyConnection;
      }
      if (name.startsWith("execute")) {
        String sql =
            args != null && args.length > 0 && args[0] instanceof String s ? s : preparedSql;
        connection.sentInTransaction.add(sql == null ? "" : sql);
        Armed fault = fire(false, sql == null ? "" : sql, List.of());
        if (fault != null) {
          return breakConnection(realConnection, fault, () -> call(real, method, args));
        }
      }
      return call(real, method, args);
    }
  }

  private interface Request {
    Object send() throws Throwable;
  }

  private static Object breakConnection(Connection real, Armed fault, Request request)
      throws Throwable {
    if (fault.kind == FaultKind.ANSWER_LOST) {
      request.send();
    }
    try {
      real.close();
    } catch (SQLException ignored) {
      // The connection is being broken on purpose; how it closes does not matter.
    }
    // After the close, so that a transaction the fault broke has rolled back and holds no locks.
    fault.meanwhile.run();
    throw new SQLException(
        "An I/O error occurred while sending to the backend (injected by nolock testkit: "
            + fault
            + ")",
        CONNECTION_FAILURE);
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
    return (T)
        Proxy.newProxyInstance(JdbcFaults.class.getClassLoader(), new Class<?>[] {type}, handler);
  }
}
