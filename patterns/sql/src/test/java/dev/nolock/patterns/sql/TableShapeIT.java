package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** {@link TableShape} against the real catalog: every rule, each with a table that breaks it. */
@ExtendWith(PostgresExtension.class)
class TableShapeIT {

  private static final Duration TIMEOUT = Duration.ofSeconds(5);

  private static final Field<String> NAME =
      field(name("name"), SQLDataType.VARCHAR(100).nullable(false));
  private static final Field<Long> TOKEN = field(name("token"), SQLDataType.BIGINT.nullable(false));
  private static final Field<Integer> COUNT =
      field(name("count"), SQLDataType.INTEGER.nullable(false));
  private static final Field<OffsetDateTime> UNTIL =
      field(name("until"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));
  private static final Field<byte[]> BODY = field(name("body"), SQLDataType.BLOB.nullable(true));
  private static final Field<String> NOTE = field(name("note"), SQLDataType.CLOB.nullable(true));

  /** The columns that fit {@link #shape}; {@code %s} is appended (a key, extra columns). */
  private static final String FITTING =
      "name varchar(100) NOT NULL, token bigint NOT NULL, count int NOT NULL,"
          + " until timestamptz, body bytea, note text%s";

  private static TableShape shape(String table) {
    return TableShape.of(SqlNames.requireSqlIdentifier("table", table))
        .columns(List.of(NAME, TOKEN, COUNT, UNTIL, BODY, NOTE))
        .uniqueKey(TOKEN, NAME);
  }

  @Test
  void aTableThatFitsHasNoProblemAndAMissingOneLacksEveryColumn(PostgresSchema pg) {
    create(pg, "fits", FITTING.formatted(", PRIMARY KEY (name, token)"));

    assertThat(shape("fits").problems(pg.dsl(), TIMEOUT)).isEmpty();
    assertThat(shape(pg.schemaName() + ".fits").problems(pg.dsl(), TIMEOUT)).isEmpty();
    assertThat(shape("absent").problems(pg.dsl(), TIMEOUT))
        .startsWith("column name is missing", "column token is missing")
        .endsWith("no unique key on (token, name)");
  }

  @Test
  void widerAndEquivalentTypesFit(PostgresSchema pg) {
    create(
        pg,
        "wider",
        "name text NOT NULL, token bigint NOT NULL, count bigint NOT NULL,"
            + " until timestamp(6) with time zone, body bytea, note varchar,"
            + " PRIMARY KEY (name, token)");
    create(
        pg,
        "wide_varchar",
        "name varchar(300) NOT NULL, token bigint NOT NULL, count int NOT NULL,"
            + " until timestamptz, body bytea, note character varying,"
            + " PRIMARY KEY (name, token)");

    assertThat(shape("wider").problems(pg.dsl(), TIMEOUT)).isEmpty();
    assertThat(shape("wide_varchar").problems(pg.dsl(), TIMEOUT)).isEmpty();
  }

  /**
   * A {@code timestamp} without time zone, a narrower {@code varchar}, an {@code int} for a {@code
   * bigint}, a {@code timestamptz} of lower precision and a bounded {@code varchar} for a text are
   * each refused with the type found and the type that fits.
   */
  @Test
  void typesThatCannotHoldEveryValueAreRefused(PostgresSchema pg) {
    create(
        pg,
        "narrow",
        "name varchar(99) NOT NULL, token int NOT NULL, count smallint NOT NULL,"
            + " until timestamp, body text, note varchar(2000), PRIMARY KEY (name, token)");
    create(
        pg,
        "coarse",
        FITTING
            .replace("until timestamptz", "until timestamptz(0)")
            .formatted(", PRIMARY KEY (name, token)"));

    assertThat(shape("narrow").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "column name is character varying(99), not text or character varying(100) or wider",
            "column token is integer, not bigint",
            "column count is smallint, not integer or bigint",
            "column until is timestamp without time zone, not timestamp with time zone",
            "column body is text, not bytea",
            "column note is character varying(2000), not text");
    assertThat(shape("coarse").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "column until is timestamp(0) with time zone, not timestamp with time zone");
  }

  /** A {@code UUID} column fits {@code uuid} only: a {@code text} one is refused. */
  @Test
  void aUuidColumnMustBeUuid(PostgresSchema pg) {
    Field<java.util.UUID> id = field(name("id"), SQLDataType.UUID.nullable(false));
    create(pg, "uuid_fits", "id uuid NOT NULL");
    create(pg, "uuid_as_text", "id text NOT NULL");

    TableShape fits = TableShape.of(SqlNames.requireSqlIdentifier("table", "uuid_fits")).column(id);
    TableShape asText =
        TableShape.of(SqlNames.requireSqlIdentifier("table", "uuid_as_text")).column(id);

    assertThat(fits.problems(pg.dsl(), TIMEOUT)).isEmpty();
    assertThat(asText.problems(pg.dsl(), TIMEOUT)).containsExactly("column id is text, not uuid");
  }

  @Test
  void nullsTheModuleWritesAndColumnsItDoesNotWriteAreChecked(PostgresSchema pg) {
    create(
        pg,
        "strict",
        FITTING
            .replace("until timestamptz", "until timestamptz NOT NULL")
            .formatted(
                ", tenant text NOT NULL, region text NOT NULL DEFAULT 'eu',"
                    + " id bigint GENERATED ALWAYS AS IDENTITY, extra text,"
                    + " PRIMARY KEY (name, token)"));

    assertThat(shape("strict").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "column until is NOT NULL, but nolock leaves it NULL or sets it so",
            "column tenant is NOT NULL without a default, and nolock does not write it");
  }

  /**
   * Only a valid, immediate, total unique index on exactly the key columns counts; a unique
   * constraint or a unique index with included columns does, in any column order.
   */
  @Test
  void theUniqueKeyMustBeOnExactlyItsColumns(PostgresSchema pg) {
    create(pg, "keyless", FITTING.formatted(""));
    create(pg, "other_key", FITTING.formatted(", PRIMARY KEY (name)"));
    create(pg, "wider_key", FITTING.formatted(", PRIMARY KEY (name, token, count)"));
    create(pg, "deferred_key", FITTING.formatted(", UNIQUE (name, token) DEFERRABLE"));
    create(pg, "partial_key", FITTING.formatted(""));
    pg.dsl().execute("CREATE UNIQUE INDEX ON partial_key (name, token) WHERE count > 0");
    create(pg, "plain_index", FITTING.formatted(""));
    pg.dsl().execute("CREATE INDEX ON plain_index (name, token)");
    create(pg, "unique_constraint", FITTING.formatted(", UNIQUE (token, name)"));
    create(pg, "including", FITTING.formatted(""));
    pg.dsl().execute("CREATE UNIQUE INDEX ON including (token, name) INCLUDE (count)");

    for (String refused :
        List.of("keyless", "wider_key", "deferred_key", "partial_key", "plain_index")) {
      assertThat(shape(refused).problems(pg.dsl(), TIMEOUT))
          .as(refused)
          .containsExactly("no unique key on (token, name)");
    }
    assertThat(shape("other_key").problems(pg.dsl(), TIMEOUT))
        .startsWith("no unique key on (token, name)")
        .hasSize(2);
    for (String accepted : List.of("unique_constraint", "including")) {
      assertThat(shape(accepted).problems(pg.dsl(), TIMEOUT)).as(accepted).isEmpty();
    }
  }

  /**
   * A unique index or constraint on fewer columns than the key, beside one on exactly the key, is
   * refused with the statement that drops it: rows the key keeps apart collide on it (SQLState
   * 23505, which no {@code ON CONFLICT} on the key catches). Partial and deferrable ones count too,
   * since they refuse such rows as well. A unique index on other columns, or on more, is left
   * alone. Before, the first two tables were accepted.
   */
  @Test
  void aUniqueIndexOnFewerColumnsThanTheKeyIsRefusedWithTheDdlToDropIt(PostgresSchema pg) {
    create(pg, "old_primary", FITTING.formatted(", PRIMARY KEY (name)"));
    pg.dsl().execute("CREATE UNIQUE INDEX old_primary_key ON old_primary (name, token)");
    create(pg, "extra_unique", FITTING.formatted(", PRIMARY KEY (name, token)"));
    pg.dsl().execute("CREATE UNIQUE INDEX token_only ON extra_unique (token) WHERE count > 0");
    create(pg, "deferred_subset", FITTING.formatted(", PRIMARY KEY (name, token)"));
    pg.dsl().execute("ALTER TABLE deferred_subset ADD CONSTRAINT by_name UNIQUE (name) DEFERRABLE");
    create(
        pg, "unrelated_unique", FITTING.formatted(", PRIMARY KEY (name, token), UNIQUE (count)"));
    pg.dsl().execute("CREATE UNIQUE INDEX key_and_count ON unrelated_unique (name, token, count)");

    assertThat(shape("old_primary").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "unique constraint old_primary_pkey on (name) is on fewer columns than the key (token,"
                + " name), so it refuses rows the key keeps apart; drop it: ALTER TABLE old_primary"
                + " DROP CONSTRAINT old_primary_pkey");
    assertThat(shape("extra_unique").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "unique index token_only on (token) is on fewer columns than the key (token, name), so"
                + " it refuses rows the key keeps apart; drop it: DROP INDEX token_only");
    assertThat(shape("deferred_subset").problems(pg.dsl(), TIMEOUT))
        .containsExactly(
            "unique constraint by_name on (name) is on fewer columns than the key (token, name), so"
                + " it refuses rows the key keeps apart; drop it: ALTER TABLE deferred_subset DROP"
                + " CONSTRAINT by_name");
    assertThat(shape("unrelated_unique").problems(pg.dsl(), TIMEOUT)).isEmpty();
  }

  @Test
  void requireThrowsTheProblemsWithTheDdlThatFits(PostgresSchema pg) {
    create(pg, "refused", FITTING.replace("until timestamptz", "until timestamp").formatted(""));
    List<String> ddl = List.of("CREATE TABLE refused (...)");

    assertThatThrownBy(() -> shape("refused").require(pg.dsl(), TIMEOUT, "app.refused", ddl))
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.table()).isEqualTo("app.refused");
              assertThat(e.problem())
                  .isEqualTo(
                      "column until is timestamp without time zone, not timestamp with time zone;"
                          + " no unique key on (token, name)");
              assertThat(e.ddl()).isEqualTo(ddl);
            });
  }

  @Test
  void aShapeItCannotCheckIsRefusedWhenDeclared() {
    TableShape shape = TableShape.of(name("t"));

    assertThatThrownBy(() -> shape.column(field(name("at"), SQLDataType.LOCALDATE.nullable(false))))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("java.time.LocalDate");
    assertThatThrownBy(() -> shape.column(NAME).column(NAME))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("declared twice");
    assertThatThrownBy(() -> shape.column(NAME).uniqueKey(TOKEN))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("token");
    assertThatThrownBy(() -> TableShape.of(null)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> shape.problems(null, Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("query timeout");
  }

  private static void create(PostgresSchema pg, String table, String columns) {
    DSLContext dsl = pg.dsl();
    dsl.execute("CREATE TABLE " + table + " (" + columns + ")");
  }
}
