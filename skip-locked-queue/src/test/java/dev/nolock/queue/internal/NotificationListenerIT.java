package dev.nolock.queue.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;

/**
 * The listen connection goes back to its pool without a LISTEN on it, whichever way listening ends:
 * otherwise the next borrower's session keeps receiving (and pgjdbc keeps queueing) the queue's
 * notifications.
 */
@ExtendWith(PostgresExtension.class)
class NotificationListenerIT {

  @Test
  void aClosedListenerHandsItsConnectionBackNotListening(PostgresSchema schema) throws Exception {
    try (HikariDataSource pool = onePool(schema)) {
      List<Integer> pids = new CopyOnWriteArrayList<>();
      List<NotificationListener.State> states = new CopyOnWriteArrayList<>();
      NotificationListener listener =
          new NotificationListener(
              recordingPids(pool, pids),
              schema.dsl(),
              newChannel(),
              "q",
              Duration.ofSeconds(1),
              Duration.ofSeconds(2),
              () -> {},
              states::add);
      listener.start();
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> states.contains(NotificationListener.State.LISTENING));

      listener.close();

      assertNextBorrowerDoesNotListen(pool, pids);
    }
  }

  @Test
  void aListenerWhoseSelfTestFailedHandsItsConnectionBackNotListening(PostgresSchema schema)
      throws Exception {
    try (HikariDataSource pool = onePool(schema)) {
      List<Integer> pids = new CopyOnWriteArrayList<>();
      List<NotificationListener.State> states = new CopyOnWriteArrayList<>();
      DSLContext unreachable =
          DSL.using(
              failingDataSource(), SQLDialect.POSTGRES); // the self-test's NOTIFY cannot be sent
      NotificationListener listener =
          new NotificationListener(
              recordingPids(pool, pids),
              unreachable,
              newChannel(),
              "q",
              Duration.ofMinutes(1), // it retries after this, long after the test
              Duration.ofSeconds(2),
              () -> {},
              states::add);
      listener.start();
      try {
        await()
            .atMost(Duration.ofSeconds(10))
            .until(() -> states.contains(NotificationListener.State.POLLING));

        assertNextBorrowerDoesNotListen(pool, pids);
      } finally {
        listener.close();
      }
    }
  }

  private static void assertNextBorrowerDoesNotListen(DataSource pool, List<Integer> pids)
      throws SQLException {
    assertThat(pids).as("connections the listener borrowed").hasSize(1);
    try (Connection next = pool.getConnection()) {
      assertThat(next.unwrap(PGConnection.class).getBackendPID())
          .as("the pool hands out the listener's connection")
          .isEqualTo(pids.get(0));
      assertThat(
              DSL.using(next, SQLDialect.POSTGRES)
                  .fetch("SELECT pg_listening_channels()")
                  .getValues(0, String.class))
          .as("channels the next borrower of the listen connection is listening on")
          .isEmpty();
    }
  }

  private static String newChannel() {
    return "nolock_listen_"
        + UUID.randomUUID().toString().replace("-", "").toLowerCase(Locale.ROOT);
  }

  private static HikariDataSource onePool(PostgresSchema schema) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(schema.jdbcUrl());
    config.setMaximumPoolSize(1);
    return new HikariDataSource(config);
  }

  /** {@code pool}, recording the server process id of each connection it hands out. */
  private static DataSource recordingPids(DataSource pool, List<Integer> pids) {
    return (DataSource)
        Proxy.newProxyInstance(
            NotificationListenerIT.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              Object result;
              try {
                result = method.invoke(pool, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
              if (method.getName().equals("getConnection")) {
                pids.add(((Connection) result).unwrap(PGConnection.class).getBackendPID());
              }
              return result;
            });
  }

  private static DataSource failingDataSource() {
    return (DataSource)
        Proxy.newProxyInstance(
            NotificationListenerIT.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) ->
                switch (method.getName()) {
                  case "toString" -> "an unreachable pool";
                  case "hashCode" -> System.identityHashCode(proxy);
                  case "equals" -> proxy == args[0];
                  default -> throw new SQLException("no connection (an unreachable pool)", "08001");
                });
  }
}
