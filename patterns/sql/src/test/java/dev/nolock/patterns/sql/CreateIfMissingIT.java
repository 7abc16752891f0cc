package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.Endpoints;
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
 * {@link CreateIfMissing} against the real PostgreSQL, where an unqualified name is looked up: a
 * table of the same name in a later schema of the search path (another tenant's) must not stand for
 * the one the call creates in the first.
 */
class CreateIfMissingIT {

  private static String url;
  private static String first;
  private static String later;

  @BeforeAll
  static void schemas() throws Exception {
    url = Endpoints.fromEnvironment().postgresUrl();
    // Generated, never taken from input, so they are safe to splice into DDL.
    String suffix = UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    first = "nolock_cim_a_" + suffix;
    later = "nolock_cim_b_" + suffix;
    try (Connection c = DriverManager.getConnection(url);
        Statement s = c.createStatement()) {
      s.execute("CREATE SCHEMA " + first);
      s.execute("CREATE SCHEMA " + later);
      s.execute("CREATE TABLE " + later + ".ledger (id bigint PRIMARY KEY, tenant text)");
      s.execute("CREATE INDEX ledger_tenant ON " + later + ".ledger (tenant)");
    }
  }

  @AfterAll
  static void dropSchemas() throws Exception {
    try (Connection c = DriverManager.getConnection(url);
        Statement s = c.createStatement()) {
      s.execute("DROP SCHEMA IF EXISTS " + first + " CASCADE");
      s.execute("DROP SCHEMA IF EXISTS " + later + " CASCADE");
    }
  }

  @Test
  void anUnqualifiedTableIsCreatedInTheFirstSchemaEvenWhenALaterOneHasItsName() throws Exception {
    try (Connection c = DriverManager.getConnection(url)) {
      c.createStatement().execute("SET search_path TO " + first + ", " + later);
      DSLContext dsl = DSL.using(c, SQLDialect.POSTGRES);

      CreateIfMissing.relation(
          dsl,
          DSL.name("ledger"),
          on ->
              on.execute("CREATE TABLE IF NOT EXISTS ledger (id bigint PRIMARY KEY, tenant text)"));
      CreateIfMissing.index(
          dsl,
          DSL.name("ledger"),
          DSL.name("ledger_tenant"),
          java.time.Duration.ofSeconds(5),
          on -> on.execute("CREATE INDEX IF NOT EXISTS ledger_tenant ON ledger (tenant)"));

      assertThat(exists(dsl, first + ".ledger"))
          .as("created where the module's unqualified statements will resolve it")
          .isTrue();
      assertThat(exists(dsl, first + ".ledger_tenant")).as("with its index").isTrue();
    }
  }

  private static boolean exists(DSLContext dsl, String qualified) {
    return dsl.fetchValue("select to_regclass({0}) is not null", DSL.val(qualified))
        .equals(Boolean.TRUE);
  }
}
