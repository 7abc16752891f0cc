package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import java.sql.Connection;
import java.sql.DriverManager;
import java.time.OffsetDateTime;
import java.util.UUID;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record;
import org.jooq.Record2;
import org.jooq.Result;
import org.jooq.ResultQuery;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link RenderedStatement} against the real PostgreSQL: the statement run from the kept text
 * returns what the built one returns, read with the same types, and binds its values with the same
 * types, which the server shows: on one connection, alternating the two, pgjdbc's statement cache
 * keeps one server-side prepared statement for the text (a value bound with another type would make
 * pgjdbc prepare the text again, and a limit bound as text would fail).
 */
class RenderedStatementIT {

  private static final Field<Long> ID = field(name("id"), SQLDataType.BIGINT);
  private static final Field<String> STATE = field(name("state"), SQLDataType.VARCHAR(16));
  private static final Field<OffsetDateTime> AT =
      field(name("at"), SQLDataType.TIMESTAMPWITHTIMEZONE);

  private static String schema;
  private static Table<?> jobs;

  @BeforeAll
  static void createTable() throws Exception {
    // Generated, never taken from input, so it is safe to splice into DDL.
    schema = "nolock_rs_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    try (Connection c = DriverManager.getConnection(Pg.url())) {
      c.createStatement().execute("CREATE SCHEMA " + schema);
      c.createStatement()
          .execute(
              "CREATE TABLE "
                  + schema
                  + ".jobs (id bigint PRIMARY KEY, state varchar(16) NOT NULL, at timestamptz)");
      c.createStatement()
          .execute(
              "INSERT INTO "
                  + schema
                  + ".jobs SELECT g, 'ready', now() FROM generate_series(1, 40) g");
    }
    jobs = table(name(schema, "jobs"));
  }

  @AfterAll
  static void drop() throws Exception {
    try (Connection c = DriverManager.getConnection(Pg.url())) {
      c.createStatement().execute("DROP SCHEMA IF EXISTS " + schema + " CASCADE");
    }
  }

  /** A limit bound as an integer, a null bound as a timestamp, rows with a timestamp. */
  private static ResultQuery<Record2<Long, OffsetDateTime>> take(
      DSLContext dsl, int max, OffsetDateTime at) {
    return dsl.update(jobs)
        .set(STATE, inline("taken"))
        .set(AT, val(at, AT))
        .where(
            ID.in(
                DSL.select(ID)
                    .from(jobs)
                    .where(STATE.eq(inline("ready")))
                    .orderBy(ID)
                    .limit(val(max))))
        .returningResult(ID, AT);
  }

  @Test
  void theRenderedTextReturnsWhatTheBuiltStatementReturnsAndTheServerPreparesItOnce()
      throws Exception {
    try (Connection connection = DriverManager.getConnection(Pg.url())) {
      DSLContext dsl = DSL.using(connection, SQLDialect.POSTGRES);
      RenderedStatement rendered = RenderedStatement.of(dsl, take(dsl, 1, null));
      OffsetDateTime at = OffsetDateTime.parse("2026-10-25T01:30:00+01:00");

      // Past pgjdbc's prepareThreshold (5), alternating: both must find the same cached statement.
      for (int round = 0; round < 8; round++) {
        Result<Record2<Long, OffsetDateTime>> built = take(dsl, 2, at).fetch();
        Result<Record> run = rendered.fetch(dsl, at, 2).fetch();

        assertThat(built).hasSize(2);
        assertThat(run).hasSize(2);
        assertThat(run.getValue(0, AT)).isEqualTo(built.getValue(0, AT)).isNotNull();
        assertThat(run.getValues(ID))
            .as("the next two ready rows, read as numbers")
            .containsExactlyInAnyOrderElementsOf(
                built.getValues(ID).stream().map(id -> id + 2).toList());
      }
      Result<Record> nulls = rendered.fetch(dsl, null, 3).fetch();
      assertThat(nulls).hasSize(3);
      assertThat(nulls.getValues(AT)).containsOnlyNulls();

      // pgjdbc sends the text with $1, $2, ... and prepares it again whenever a value's type
      // changes: executions counted on one statement show that both bound the same types.
      Record executions =
          dsl.fetchOne(
              "SELECT count(*) AS statements, sum(generic_plans + custom_plans) AS executions"
                  + " FROM pg_prepared_statements WHERE statement = ?",
              numbered(rendered.sql()));
      assertThat(executions.get("statements", Integer.class)).isEqualTo(1);
      assertThat(executions.get("executions", Integer.class))
          .as("of 17 runs, the ones after pgjdbc's prepareThreshold (5) on one statement")
          .isGreaterThanOrEqualTo(10);
    }
  }

  private static String numbered(String sql) {
    StringBuilder text = new StringBuilder();
    int next = 1;
    for (char c : sql.toCharArray()) {
      if (c == '?') {
        text.append('$').append(next++);
      } else {
        text.append(c);
      }
    }
    return text.toString();
  }
}
