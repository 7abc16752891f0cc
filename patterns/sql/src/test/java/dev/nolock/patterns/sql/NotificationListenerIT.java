package dev.nolock.patterns.sql;

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
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * The listen connection goes back to its pool without a LISTEN on it, whichever way listening ends:
 * otherwise the next borrower's session keeps receiving (and pgjdbc keeps queueing) the channel's
 * notifications.
 */
@ExtendWith(PostgresExtension.class)
class NotificationListenerIT {

  private static final NotificationListener.Receiver NOTHING =
      new NotificationListener.Receiver() {
        @Override
        public void listening() {}

        @Override
        public void received(List<String> payloads) {}
      };

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
              "test",
              "",
              Duration.ofSeconds(1),
              Duration.ofSeconds(2),
              NOTHING,
              () -> true,
              states::add);
      listener.start();
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> states.contains(NotificationListener.State.LISTENING));

      listener.close();

      assertNextBorrowerDoesNotListen(pool, pids);
    }
  }

  /**
   * The self-test times out, as it does behind PgBouncer in transaction pooling: its NOTIFY goes to
   * another database on the same server (PostgreSQL delivers a notification only to listeners in
   * the database it was sent in), so it is sent without error and never arrives. A second listener
   * in that database hears it, which shows the timeout path ran, not the error path of a NOTIFY
   * that could not be sent.
   */
  @Test
  void aListenerWhoseSelfTestTimedOutHandsItsConnectionBackNotListening(PostgresSchema schema)
      throws Exception {
    String channel = newChannel();
    try (HikariDataSource pool = onePool(schema);
        HikariDataSource otherDatabase = pool(otherDatabaseUrl(schema), 2);
        Connection witness = otherDatabase.getConnection()) {
      DSL.using(witness, SQLDialect.POSTGRES).query("LISTEN {0}", DSL.name(channel)).execute();
      List<Integer> pids = new CopyOnWriteArrayList<>();
      List<NotificationListener.State> states = new CopyOnWriteArrayList<>();
      NotificationListener listener =
          new NotificationListener(
              recordingPids(pool, pids),
              DSL.using(otherDatabase, SQLDialect.POSTGRES),
              channel,
              "test",
              "",
              Duration.ofMinutes(1), // polling from now on; nothing retries within the test
              Duration.ofMillis(300), // the self-test's wait: short, it cannot succeed
              NOTHING,
              () -> true,
              states::add);
      listener.start();
      try {
        await()
            .atMost(Duration.ofSeconds(10))
            .until(() -> states.contains(NotificationListener.State.POLLING));

        assertThat(selfTestsHeard(witness))
            .as("self-test notifications sent (heard in the other database)")
            .isOne();
        assertThat(states)
            .as("what the listener reported")
            .containsExactly(
                NotificationListener.State.STARTING, NotificationListener.State.POLLING);
        assertNextBorrowerDoesNotListen(pool, pids);
      } finally {
        listener.close();
      }
    }
  }

  /** The self-test notifications {@code witness} has received so far. */
  private static long selfTestsHeard(Connection witness) throws SQLException {
    // Notifications are read with the next message from the server: a round trip first.
    DSL.using(witness, SQLDialect.POSTGRES).selectOne().execute();
    PGNotification[] heard = witness.unwrap(PGConnection.class).getNotifications();
    return heard == null
        ? 0
        : Arrays.stream(heard)
            .filter(n -> n.getParameter().startsWith("nolock-self-test:"))
            .count();
  }

  /**
   * The URL of another database on the same server: {@code postgres}, which every cluster has, or
   * {@code template1} when the tests already run in {@code postgres}.
   */
  private static String otherDatabaseUrl(PostgresSchema schema) {
    String current = schema.dsl().fetchValue(DSL.field("current_database()", String.class));
    String other = current.equals("postgres") ? "template1" : "postgres";
    Matcher url =
        Pattern.compile("^(jdbc:postgresql://[^/]*/)([^?]*)(.*)$").matcher(schema.jdbcUrl());
    assertThat(url.matches()).as("a pgjdbc URL with a database: %s", schema.jdbcUrl()).isTrue();
    return url.group(1) + other + url.group(3);
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
    return pool(schema.jdbcUrl(), 1);
  }

  private static HikariDataSource pool(String jdbcUrl, int size) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(size);
    config.setMinimumIdle(0);
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
}
