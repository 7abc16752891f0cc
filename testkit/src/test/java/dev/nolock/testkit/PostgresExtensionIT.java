package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.Record1;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.testkit.engine.EngineTestKit;

@ExtendWith(PostgresExtension.class)
class PostgresExtensionIT {

  private final PostgresSchema schema;

  PostgresExtensionIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) throws SQLException {
    try (Connection connection = schema.dataSource().getConnection();
        Statement statement = connection.createStatement()) {
      statement.execute("CREATE TABLE ledger (id bigint PRIMARY KEY, note text NOT NULL)");
    }
  }

  @Test
  void unqualifiedTableLandsInTheFreshSchemaAndRoundTripsARow() {
    var ledger = DSL.table(DSL.name("ledger"));
    var id = DSL.field(DSL.name("id"), SQLDataType.BIGINT);
    var note = DSL.field(DSL.name("note"), SQLDataType.CLOB);

    schema.dsl().insertInto(ledger, id, note).values(1L, "first").execute();
    Record1<String> stored = schema.dsl().select(note).from(ledger).where(id.eq(1L)).fetchOne();

    assertThat(stored).isNotNull();
    assertThat(stored.value1()).isEqualTo("first");
    assertThat(
            schema
                .dsl()
                .fetchValue(
                    // The schema the unqualified name resolves to: other test classes, running at
                    // once or killed before their cleanup, may have a "ledger" of their own.
                    "select n.nspname from pg_class c join pg_namespace n on n.oid ="
                        + " c.relnamespace where c.oid = to_regclass('ledger')"))
        .isEqualTo(schema.schemaName());
    assertThat(schema.dsl().fetchValue("select to_regclass('public.ledger')::text")).isNull();
  }

  @Test
  void everyConnectionOfThePoolUsesTheSchema() throws SQLException {
    try (Connection first = schema.dataSource().getConnection();
        Connection second = schema.dataSource().getConnection()) {
      assertThat(currentSchema(first)).isEqualTo(schema.schemaName());
      assertThat(currentSchema(second)).isEqualTo(schema.schemaName());
    }
    assertThat(schema.jdbcUrl()).contains("currentSchema=" + schema.schemaName());
    assertThat(schema.schemaName()).matches("nolock_t_[0-9a-f]{12}");
  }

  @Test
  void anotherTestClassGetsAnotherSchemaThatIsDroppedAfterIt() {
    OtherClass.seen.set(null);

    var results =
        EngineTestKit.engine("junit-jupiter").selectors(selectClass(OtherClass.class)).execute();

    results.testEvents().assertStatistics(stats -> stats.succeeded(1).failed(0));
    String other = OtherClass.seen.get();
    assertThat(other).startsWith("nolock_t_").isNotEqualTo(schema.schemaName());
    assertThat(
            schema
                .dsl()
                .fetchCount(
                    DSL.selectOne()
                        .from(DSL.table(DSL.name("information_schema", "schemata")))
                        .where(DSL.field(DSL.name("schema_name")).eq(other))))
        .as("schema of the finished class")
        .isZero();
    assertThat(
            schema
                .dsl()
                .fetchCount(
                    DSL.selectOne()
                        .from(DSL.table(DSL.name("information_schema", "schemata")))
                        .where(DSL.field(DSL.name("schema_name")).eq(schema.schemaName()))))
        .as("schema of this running class")
        .isOne();
  }

  private static String currentSchema(Connection connection) throws SQLException {
    try (Statement statement = connection.createStatement();
        ResultSet rows = statement.executeQuery("select current_schema()")) {
      rows.next();
      return rows.getString(1);
    }
  }

  /** Run only through EngineTestKit above; it records which schema it was given. */
  @ExtendWith(PostgresExtension.class)
  static class OtherClass {
    static final AtomicReference<String> seen = new AtomicReference<>();

    @Test
    void doesNotSeeTheOuterClassTable(PostgresSchema schema) {
      seen.set(schema.schemaName());
      assertThat(schema.dsl().fetchValue("select to_regclass('ledger')::text")).isNull();
    }
  }
}
