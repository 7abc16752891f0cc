package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.Statement;
import java.util.UUID;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link OwnTransaction#onCallerConnection} against the real PostgreSQL (endpoint from {@code
 * NOLOCK_PG_URL}, as system property or environment variable, else the loopback default): what it
 * refuses, what it accepts, and the case the Javadoc says it cannot detect. The work is one insert
 * into a table of a schema made for this class; "committed" means another connection sees the row.
 */
class OwnTransactionIT {

  private static final String DEFAULT_PG_URL =
      "jdbc:postgresql://127.0.0.1:5432/test?user=postgres";

  private static String url;
  private static String schema;
  private static HikariDataSource autoCommitPool;
  private static HikariDataSource manualCommitPool;
  private static DSLContext renderWith;

  @BeforeAll
  static void schemaAndPools() throws Exception {
    String configured = System.getProperty("NOLOCK_PG_URL");
    configured =
        configured == null || configured.isBlank() ? System.getenv("NOLOCK_PG_URL") : configured;
    url = configured == null || configured.isBlank() ? DEFAULT_PG_URL : configured;
    // Generated, never taken from input, so it is safe to splice into DDL.
    schema = "nolock_ot_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    try (Connection c = DriverManager.getConnection(url);
        Statement s = c.createStatement()) {
      s.execute("CREATE SCHEMA " + schema);
      s.execute("CREATE TABLE " + schema + ".effects (what text NOT NULL)");
    }
    autoCommitPool = pool(true);
    manualCommitPool = pool(false);
    renderWith = DSL.using(SQLDialect.POSTGRES);
  }

  private static HikariDataSource pool(boolean autoCommit) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(url);
    config.setAutoCommit(autoCommit);
    config.setMaximumPoolSize(2);
    config.setMinimumIdle(0);
    return new HikariDataSource(config);
  }

  @AfterAll
  static void dropSchema() throws Exception {
    autoCommitPool.close();
    manualCommitPool.close();
    try (Connection c = DriverManager.getConnection(url);
        Statement s = c.createStatement()) {
      s.execute("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }
  }

  private static int write(DSLContext caller, String what) {
    return OwnTransaction.onCallerConnection(
        caller,
        renderWith,
        on -> on.execute("INSERT INTO " + schema + ".effects (what) VALUES (?)", what));
  }

  private static boolean committed(String what) {
    return DSL.using(autoCommitPool, SQLDialect.POSTGRES)
        .fetchExists(
            DSL.table(DSL.name(schema, "effects")),
            DSL.field(DSL.name("what"), String.class).eq(what));
  }

  @Test
  void aContextInNoTransactionOnAnAutocommitPoolIsRefusedAndWritesNothing() {
    String what = UUID.randomUUID().toString();

    Throwable refused =
        catchThrowable(() -> write(DSL.using(autoCommitPool, SQLDialect.POSTGRES), what));

    assertThat(refused)
        .as(
            "a context in no transaction (autocommit) must be refused: its statements would commit"
                + " one by one, apart from the caller's writes")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("in no transaction")
        .hasMessageContaining("dsl.transaction(");
    assertThat(committed(what)).as("refused before anything was sent").isFalse();
  }

  @Test
  void aCallersTransactionIsAcceptedAndItsWorkCommitsAndRollsBackWithIt() {
    DSLContext app = DSL.using(autoCommitPool, SQLDialect.POSTGRES);
    String kept = UUID.randomUUID().toString();
    String undone = UUID.randomUUID().toString();

    app.transaction(cfg -> write(cfg.dsl(), kept));
    Throwable rolledBack =
        catchThrowable(
            () ->
                app.transaction(
                    cfg -> {
                      write(cfg.dsl(), undone);
                      throw new IllegalStateException("the caller's business write failed");
                    }));

    assertThat(committed(kept)).isTrue();
    assertThat(rolledBack).hasMessageContaining("business write failed");
    assertThat(committed(undone)).as("rolled back with the caller").isFalse();
  }

  @Test
  void aContextOnAConnectionWhoseAutocommitTheCallerTurnedOffIsAccepted() throws Exception {
    String what = UUID.randomUUID().toString();
    try (Connection connection = autoCommitPool.getConnection()) {
      connection.setAutoCommit(false);
      write(DSL.using(connection, SQLDialect.POSTGRES), what);
      assertThat(committed(what)).as("not before the caller commits").isFalse();
      connection.commit();
    }
    assertThat(committed(what)).isTrue();
  }

  /**
   * What the Javadoc lists as undetectable: on a pool with autocommit off, a context in no
   * transaction hands out a connection that looks exactly like a transaction that has not sent a
   * statement yet. The call succeeds, and the pool rolls the work back when it takes the connection
   * back. This test pins that limitation, so the Javadoc stays true.
   */
  @Test
  void aContextInNoTransactionOnAPoolWithAutocommitOffCannotBeToldApartAndItsWorkIsLost() {
    String what = UUID.randomUUID().toString();

    int rows = write(DSL.using(manualCommitPool, SQLDialect.POSTGRES), what);

    assertThat(rows).as("accepted and run").isEqualTo(1);
    assertThat(committed(what)).as("rolled back by the pool").isFalse();
  }
}
