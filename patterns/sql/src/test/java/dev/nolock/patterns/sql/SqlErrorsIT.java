package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlErrors.Kind;
import java.sql.SQLException;
import java.sql.SQLTransientConnectionException;
import java.util.UUID;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@link SqlErrors}: the policy on the failures the real PostgreSQL returns, and the row check. */
class SqlErrorsIT {

  private static HikariDataSource pool;
  private static DSLContext dsl;

  @BeforeAll
  static void connect() {
    pool = Pg.pool();
    dsl = DSL.using(pool, SQLDialect.POSTGRES);
  }

  @AfterAll
  static void close() {
    pool.close();
  }

  @Test
  void aMissingTableIsASchemaFaultNotARetry() {
    assertThatThrownBy(
            () ->
                SqlErrors.run(
                    () -> "reading the lease table",
                    () -> dsl.fetch("select * from nolock_no_such_table_9f3")))
        .isInstanceOf(IllegalStateException.class)
        .isNotInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("reading the lease table")
        .hasMessageContaining("42P01")
        .hasMessageContaining("createTableIfMissing");
  }

  @Test
  void aStatementTimeoutIsTransient() {
    assertThatThrownBy(
            () ->
                SqlErrors.run(
                    () -> "waiting",
                    () ->
                        dsl.transactionResult(
                            cfg -> {
                              cfg.dsl()
                                  .fetch("select set_config('statement_timeout', ?, true)", "1");
                              return cfg.dsl().fetch("select pg_sleep(1)");
                            })))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("PostgreSQL failed while waiting")
        .hasMessageContaining("57014");
  }

  /**
   * A write on a read-only server (SQLState 25006, what a pooled connection to a primary demoted by
   * a failover answers) is retryable, and nothing was written; the same write on a writable
   * connection then succeeds. Before, it was an {@code IllegalStateException} ("a retry would
   * likely repeat it").
   */
  @Test
  void aWriteOnAReadOnlyServerIsRetryableAndWroteNothing() {
    // The shared database's public schema: a name of its own, so concurrent runs do not meet.
    String probe = "nolock_read_only_probe_" + UUID.randomUUID().toString().replace("-", "");
    dsl.execute("create table " + probe + " (id int primary key)");
    try {
      assertThatThrownBy(
              () ->
                  SqlErrors.run(
                      () -> "writing the probe",
                      () ->
                          dsl.transactionResult(
                              cfg -> {
                                cfg.dsl().execute("set transaction read only");
                                return cfg.dsl().execute("insert into " + probe + " values (1)");
                              })))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("PostgreSQL failed while writing the probe")
          .hasMessageContaining("25006");
      assertThat(dsl.fetchCount(DSL.table(DSL.name(probe)))).isZero();

      assertThat(dsl.execute("insert into " + probe + " values (1)")).isEqualTo(1);
    } finally {
      dsl.execute("drop table " + probe);
    }
  }

  @Test
  void aRefusedValueIsTheCallersToFix() {
    assertThatThrownBy(() -> SqlErrors.run(() -> "dividing", () -> dsl.fetch("select 1/0")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("22012");
  }

  /**
   * A refused row's values stay out of the message nolock builds: not PostgreSQL's DETAIL ({@code
   * Failing row contains (...)}, {@code Key (...)=(...)}), not the values pgjdbc inlines into a
   * batch's message, not a refused input the primary message quotes; the SQLState and the
   * constraint's name stay, and the cause still carries everything.
   */
  @Test
  void aRefusedRowsValuesStayOutOfTheMessageButNotOutOfTheCause() {
    String probe = "nolock_detail_probe_" + UUID.randomUUID().toString().replace("-", "");
    dsl.execute(
        "create table "
            + probe
            + " (id int primary key, note text constraint no_cards check (note not like"
            + " '%4111%'))");
    try {
      dsl.execute("insert into " + probe + " values (1, 'first')");
      assertRefusedWithoutValues(
          "a check violation, whose DETAIL quotes the row",
          () -> dsl.execute("insert into " + probe + " values (2, ?)", CARD),
          "23514",
          "no_cards");
      assertRefusedWithoutValues(
          "a unique violation, whose DETAIL quotes the key",
          () -> dsl.execute("insert into " + probe + " values (?, 'again')", 1),
          "23505",
          probe + "_pkey");
      assertRefusedWithoutValues(
          "a batch, whose pgjdbc message inlines the bound values",
          () ->
              dsl.batch(dsl.query("insert into " + probe + " values (?, ?)", null, null))
                  .bind(3, CARD)
                  .execute(),
          "23514",
          "no_cards");
      assertRefusedWithoutValues(
          "an input the server cannot read, which its primary message quotes",
          () -> dsl.fetch("select cast(? as int)", CARD),
          "22P02",
          "22P02");
    } finally {
      dsl.execute("drop table " + probe);
    }
  }

  /**
   * A trigger's PL/pgSQL {@code RAISE} (or {@code ASSERT}) writes the primary message itself and
   * can quote the row in it under any SQLState, here the check violation's {@code 23514} and the
   * lock timeout's {@code 55P03}, which keep the server's message otherwise. The server names where
   * the message came from (pgjdbc's file and routine): what user code wrote stays out of the
   * message nolock builds, the SQLState stays, and the cause keeps the text. Before, the message
   * was "card 4111-1111-1111-1111 refused".
   */
  @Test
  void aMessageATriggerRaisesStaysOutWhateverItsState() {
    String probe = "nolock_raise_probe_" + UUID.randomUUID().toString().replace("-", "");
    dsl.execute("create table " + probe + " (id int primary key, secret text)");
    dsl.execute(
        "create function "
            + probe
            + "_check() returns trigger language plpgsql as $$ begin"
            + " if NEW.id = 1 then raise exception 'card % refused', NEW.secret"
            + " using errcode = '23514'; end if;"
            + " if NEW.id = 2 then raise exception 'card % busy', NEW.secret"
            + " using errcode = '55P03'; end if;"
            + " assert NEW.id <> 3, 'card ' || NEW.secret || ' asserted';"
            + " return NEW; end $$");
    dsl.execute(
        "create trigger "
            + probe
            + "_check before insert on "
            + probe
            + " for each row execute function "
            + probe
            + "_check()");
    try {
      assertRefusedWithoutValues(
          "a RAISE with a check violation's state",
          () -> dsl.execute("insert into " + probe + " values (1, ?)", CARD),
          "23514",
          "PL/pgSQL");
      Throwable busy =
          catchThrowable(
              () ->
                  SqlErrors.run(
                      () -> "writing the probe",
                      () -> dsl.execute("insert into " + probe + " values (2, ?)", CARD)));
      assertThat(busy).isInstanceOf(BackendUnavailableException.class);
      assertThat(busy.getMessage()).contains("55P03").doesNotContain("4111");
      assertThat(busy).hasStackTraceContaining("4111");
      Throwable asserted =
          catchThrowable(() -> dsl.execute("insert into " + probe + " values (3, ?)", CARD));
      assertThat(SqlErrors.serverMessage(asserted)).doesNotContain("4111");
      assertThat(asserted.getMessage()).contains("4111");
    } finally {
      dsl.execute("drop table " + probe);
      dsl.execute("drop function " + probe + "_check()");
    }
  }

  /** The server's own messages, which quote no row, stay as the server wrote them. */
  @Test
  void theServersOwnMessagesStay() {
    Throwable missing = catchThrowable(() -> dsl.fetch("select * from nolock_no_such_table_9f3"));
    assertThat(SqlErrors.serverMessage(missing))
        .isEqualTo("relation \"nolock_no_such_table_9f3\" does not exist");
    Throwable timedOut =
        catchThrowable(
            () ->
                dsl.transactionResult(
                    cfg -> {
                      cfg.dsl().fetch("select set_config('statement_timeout', ?, true)", "1");
                      return cfg.dsl().fetch("select pg_sleep(1)");
                    }));
    assertThat(SqlErrors.serverMessage(timedOut))
        .isEqualTo("canceling statement due to statement timeout");
  }

  /**
   * A jOOQ failure without a driver exception (a conversion jOOQ does itself) can quote a value in
   * its message too: the message names the exception's class instead.
   */
  @Test
  void aFailureWithoutAnSqlStateIsNamedByItsClassNotItsMessage() {
    DataAccessException converting =
        new org.jooq.exception.DataTypeException("Cannot convert from " + CARD + " to class Long");
    RuntimeException translated = SqlErrors.translate(converting, "reading the probe");
    assertThat(translated.getMessage())
        .contains("reading the probe")
        .contains("DataTypeException")
        .doesNotContain("4111");
    assertThat(translated.getCause()).isSameAs(converting);
  }

  private static final String CARD = "card 4111-1111-1111-1111";

  private static void assertRefusedWithoutValues(
      String what, Runnable statement, String sqlState, String named) {
    Throwable thrown =
        catchThrowable(() -> SqlErrors.run(() -> "writing the probe", () -> run(statement)));
    assertThat(thrown).as(what).isInstanceOf(IllegalArgumentException.class);
    assertThat(thrown.getMessage())
        .as(what)
        .contains("writing the probe")
        .contains(sqlState)
        .contains(named)
        .doesNotContain("4111")
        .doesNotContain("Key (");
    StringBuilder causes = new StringBuilder();
    for (Throwable t = thrown.getCause(); t != null; t = t.getCause()) {
      causes.append(t.getMessage()).append('\n');
    }
    assertThat(causes.toString())
        .as(what + ": the cause keeps what the server said")
        .containsAnyOf("4111", "Key (id)=(1)");
  }

  private static Object run(Runnable statement) {
    statement.run();
    return null;
  }

  @Test
  void anUnknownStateIsNotReportedAsRetryable() {
    // 25P02: "current transaction is aborted": a retry of the statement alone repeats it.
    assertThat(SqlErrors.classify(new DataAccessException("x", new SQLException("x", "25P02"))))
        .isEqualTo(Kind.OTHER);
    assertThat(SqlErrors.classify(new DataAccessException("no state"))).isEqualTo(Kind.OTHER);
    assertThat(SqlErrors.classify(new SQLException("x", "08006"))).isEqualTo(Kind.TRANSIENT);
    assertThat(SqlErrors.classify(new SQLException("x", "40001"))).isEqualTo(Kind.TRANSIENT);
    assertThat(SqlErrors.classify(new SQLException("x", "55P03"))).isEqualTo(Kind.TRANSIENT);
    assertThat(SqlErrors.classify(new SQLException("x", "3F000"))).isEqualTo(Kind.SCHEMA);
    assertThat(SqlErrors.classify(new SQLException("x", "23505"))).isEqualTo(Kind.DATA);
    assertThat(
            SqlErrors.isTransient(
                new RuntimeException(new SQLTransientConnectionException("pool timed out"))))
        .isTrue();
  }

  @Test
  void moreThanOneRowWhereOneWasExpectedIsAnErrorNotASuccess() {
    assertThat(SqlErrors.atMostOneRow(0, "renewal", "t", "(name)")).isFalse();
    assertThat(SqlErrors.atMostOneRow(1, "renewal", "t", "(name)")).isTrue();
    assertThatThrownBy(() -> SqlErrors.atMostOneRow(2, "renewal of lock \"a\"", "t", "(name)"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("changed 2 rows")
        .hasMessageContaining("primary key on (name)");
  }
}
