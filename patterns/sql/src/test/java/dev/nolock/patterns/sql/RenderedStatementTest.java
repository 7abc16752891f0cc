package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Query;
import org.jooq.Record1;
import org.jooq.ResultQuery;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Test;

/**
 * {@link RenderedStatement} without a server: the statement run from the kept text sends exactly
 * what the statement built with the same values sends (the text, each value with its type), and
 * what it refuses. Against PostgreSQL: {@code RenderedStatementIT}.
 */
class RenderedStatementTest {

  private static final DSLContext PG = DSL.using(SQLDialect.POSTGRES);
  private static final Field<String> STATE = field(name("state"), SQLDataType.VARCHAR(16));
  private static final Field<OffsetDateTime> AT =
      field(name("at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  private static final Field<Long> ID = field(name("id"), SQLDataType.BIGINT);
  private static final Field<String> OWNER = field(name("owner"), SQLDataType.VARCHAR(100));
  private static final Field<Integer> RUNS = field(name("runs"), SQLDataType.INTEGER);

  /** Inline values (the state), a bound null, a bound value used twice, rows returned. */
  private static ResultQuery<Record1<Integer>> finish(OffsetDateTime at, long id, String owner) {
    return PG.update(table(name("jobs")))
        .set(STATE, inline("done"))
        .set(AT, val(at, AT))
        .where(ID.eq(id))
        .and(OWNER.eq(owner).or(OWNER.isNull().and(ID.gt(id))))
        .returningResult(RUNS);
  }

  private static String sent(Query query) {
    return RenderedStatement.sent(PG, query);
  }

  @Test
  void theStatementRunFromTheKeptTextReadsAsTheStatementBuiltWithTheSameValues() {
    RenderedStatement rendered = RenderedStatement.of(PG, finish(null, 1L, "shape"));
    OffsetDateTime at = OffsetDateTime.of(2026, 3, 29, 1, 30, 0, 0, ZoneOffset.ofHours(1));

    assertThat(sent(rendered.fetch(PG, at, 42L, "o'brien", 42L)))
        .isEqualTo(sent(finish(at, 42L, "o'brien")));
    assertThat(sent(rendered.fetch(PG, null, -7L, "", -7L))).isEqualTo(sent(finish(null, -7L, "")));
    assertThat(rendered.sql()).isEqualTo(PG.render(finish(null, 1L, "shape")));
    assertThat(rendered.fetch(PG, at, 1L, "x", 1L).fields())
        .as("rows read as the shape's fields, with their types")
        .containsExactly(RUNS);
  }

  @Test
  void valuesPassedInAnotherOrderThanTheShapeBindsThemAreCaughtByTheComparison() {
    Query shape = PG.update(table(name("jobs"))).set(OWNER, "new").where(STATE.eq("running"));
    RenderedStatement rendered = RenderedStatement.of(PG, shape);

    // The check each user keeps: two strings swapped still bind, and read differently.
    assertThat(sent(rendered.query(PG, "running", "new"))).isNotEqualTo(sent(shape));
    assertThat(sent(rendered.query(PG, "new", "running"))).isEqualTo(sent(shape));
  }

  @Test
  void aStatementWithoutRowsRunsAsAQueryAndRefusesFetch() {
    Query shape = PG.deleteFrom(table(name("jobs"))).where(ID.eq(1L)).and(STATE.eq(inline("done")));
    RenderedStatement rendered = RenderedStatement.of(PG, shape);

    assertThat(sent(rendered.query(PG, 9L)))
        .isEqualTo(
            sent(
                PG.deleteFrom(table(name("jobs"))).where(ID.eq(9L)).and(STATE.eq(inline("done")))));
    assertThatThrownBy(() -> rendered.fetch(PG, 9L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("returns no rows")
        .hasMessageContaining("query(...).execute()");
  }

  @Test
  void aValueOfAnotherJavaTypeThanItsKeptTypeIsRefusedNotConverted() {
    RenderedStatement rendered = RenderedStatement.of(PG, finish(null, 1L, "shape"));

    // jOOQ would convert both silently: the text to null, the int to a long.
    assertThatThrownBy(() -> rendered.fetch(PG, null, "42", "o", 42L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Value 2 is a java.lang.String (42)")
        .hasMessageContaining("binds a java.lang.Long");
    assertThatThrownBy(() -> rendered.fetch(PG, null, 42, "o", 42L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Value 2 is a java.lang.Integer");
    assertThat(sent(rendered.fetch(PG, null, 42L, "o", 42L)))
        .as("a null of any kept type, and values of their kept types, pass")
        .isEqualTo(sent(finish(null, 42L, "o")));
  }

  @Test
  void whatIsSentIsWhatTheDriverReceivesWithEachValuesJavaType() {
    assertThat(sent(finish(null, 42L, "o")))
        .isEqualTo(
            "update \"jobs\" set \"state\" = 'done', \"at\" = cast(? as timestamp with time zone)"
                + " where (\"id\" = ? and (\"owner\" = ? or (\"owner\" is null and \"id\" > ?)))"
                + " returning \"runs\"\n"
                + " binds: [null, 42 (Long), o (String), 42 (Long)]");
  }

  @Test
  void theWrongNumberOfValuesIsRefusedWithTheCountAndTheText() {
    RenderedStatement rendered = RenderedStatement.of(PG, finish(null, 1L, "shape"));

    assertThatThrownBy(() -> rendered.fetch(PG, null, 1L, "o"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("binds 4 values, got 3")
        .hasMessageContaining("update \"jobs\"");
  }

  @Test
  void aTextThatJooqWouldReadBackAsAnotherStatementIsRefusedWhenRendered() {
    // An unquoted name with a colon: jOOQ's plain SQL takes ":b" for a named parameter.
    Query shape = PG.select(field(unquotedName("a:b"))).from(table(name("jobs"))).where(ID.eq(1L));

    assertThatThrownBy(() -> RenderedStatement.of(PG, shape))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("reads the rendered statement back differently")
        .hasMessageContaining("a:b");
  }
}
