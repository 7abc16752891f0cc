package dev.nolock.schedule;

import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.TcpProxy;
import java.io.PrintWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.logging.Logger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * PostgreSQL reached through a {@link TcpProxy} that blips once, at a chosen statement: when the
 * armed statement is prepared, the proxy cuts every connection and at once accepts new ones again.
 * The statement then fails with pgjdbc's I/O error (SQLState 08006) on a connection the server no
 * longer serves, so the server never sees it; the next connection works.
 *
 * <p>Every connection is a new one through the proxy (no pool), as after a pool's eviction of a
 * broken connection.
 */
final class DatabaseBlip implements AutoCloseable {

  private final TcpProxy proxy;
  private final PGSimpleDataSource direct;
  private final AtomicReference<Arming> armed = new AtomicReference<>();
  private final AtomicInteger fired = new AtomicInteger();

  /** Which statement to break: the {@code skip + 1}-th one whose SQL matches. */
  private static final class Arming {
    final Predicate<String> sql;
    final AtomicInteger skip;

    Arming(Predicate<String> sql, int skip) {
      this.sql = sql;
      this.skip = new AtomicInteger(skip);
    }
  }

  private DatabaseBlip(PostgresSchema schema) {
    Matcher url = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/").matcher(schema.jdbcUrl());
    if (!url.find()) {
      throw new IllegalArgumentException("no host and port in " + schema.jdbcUrl());
    }
    this.proxy = TcpProxy.start(url.group(1), Integer.parseInt(url.group(2)));
    this.direct = new PGSimpleDataSource();
    direct.setURL(
        schema.jdbcUrl().replace(url.group(1) + ":" + url.group(2), "127.0.0.1:" + proxy.port()));
  }

  /** A proxy in front of the schema's server. */
  static DatabaseBlip before(PostgresSchema schema) {
    return new DatabaseBlip(schema);
  }

  /**
   * Arms the blip for the next statement whose lower-cased SQL matches {@code sql}, after {@code
   * skip} earlier matches pass unharmed.
   */
  void onStatement(Predicate<String> sql, int skip) {
    armed.set(new Arming(sql, skip));
  }

  /** How many times the blip fired. */
  int fired() {
    return fired.get();
  }

  DataSource dataSource() {
    return new BlippingDataSource();
  }

  @Override
  public void close() {
    proxy.close();
  }

  private void beforePrepare(String sql) {
    Arming arming = armed.get();
    if (arming == null || !arming.sql.test(sql.toLowerCase(Locale.ROOT))) {
      return;
    }
    if (arming.skip.getAndDecrement() > 0 || !armed.compareAndSet(arming, null)) {
      return;
    }
    proxy.cut();
    proxy.restore();
    fired.incrementAndGet();
  }

  private Connection wrap(Connection connection) {
    return (Connection)
        Proxy.newProxyInstance(
            Connection.class.getClassLoader(),
            new Class<?>[] {Connection.class},
            (self, method, args) -> {
              if (method.getName().startsWith("prepare")
                  && args != null
                  && args.length > 0
                  && args[0] instanceof String sql) {
                beforePrepare(sql);
              }
              try {
                return method.invoke(connection, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
            });
  }

  private final class BlippingDataSource implements DataSource {

    @Override
    public Connection getConnection() throws SQLException {
      return wrap(direct.getConnection());
    }

    @Override
    public Connection getConnection(String username, String password) throws SQLException {
      return wrap(direct.getConnection(username, password));
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
}
