package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.UUID;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link Fence#createTableIfMissing} on the real PostgreSQL: it adds the {@code last_write} column
 * to a fence table made before write ids existed, and a role that does not own a complete table can
 * call it.
 */
@ExtendWith(PostgresExtension.class)
class FenceSchemaIT {

  /** The fence table as versions without write ids created it. */
  private static final String OLD_DDL =
      "create table %s (name varchar(255) primary key, token bigint not null check (token > 0),"
          + " owner varchar(255) not null)";

  private final PostgresSchema schema;

  FenceSchemaIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @Test
  void anOldTableGetsTheLastWriteColumnAndKeepsItsRows() {
    DSLContext dsl = schema.dsl();
    dsl.execute(String.format(OLD_DDL, "old_fences"));
    dsl.execute("insert into old_fences values ('invoice-42', 7, 'A')");
    Fence fence = Fence.onTable("old_fences");

    fence.createTableIfMissing(dsl);
    fence.createTableIfMissing(dsl);

    assertThat(lastWriteColumns("old_fences")).isEqualTo(1);
    Lease lease = lease("invoice-42", "A", 7);
    assertThat(fence.write(dsl, lease, WriteId.of("w1"), tx -> 1).get().alreadyWritten()).isFalse();
    assertThat(fence.write(dsl, lease, WriteId.of("w1"), tx -> 1).get().alreadyWritten()).isTrue();
    assertThat(fence.write(dsl, lease("invoice-42", "B", 6), tx -> 1).isLeft())
        .as("the row written before the column existed still fences")
        .isTrue();
  }

  @Test
  void aSchemaQualifiedTableIsCreatedWithTheColumn() {
    Fence fence = Fence.onTable(schema.schemaName() + ".qualified_fences");

    fence.createTableIfMissing(schema.dsl());

    assertThat(lastWriteColumns("qualified_fences")).isEqualTo(1);
  }

  @Test
  void aRoleThatDoesNotOwnACompleteTableCanCallCreateTableIfMissing() {
    Fence fence = Fence.onTable("complete_fences");
    fence.createTableIfMissing(schema.dsl());

    asWriterRole(
        "complete_fences",
        tx -> {
          fence.createTableIfMissing(tx);
          assertThat(fence.write(tx, lease("invoice-42", "A", 7), tx2 -> 1).isRight()).isTrue();
        });
  }

  @Test
  void negativeControlThatRoleIssuingTheAlterUnconditionallyFails() {
    Fence.onTable("complete_fences_2").createTableIfMissing(schema.dsl());

    asWriterRole(
        "complete_fences_2",
        tx ->
            assertThatThrownBy(
                    () ->
                        tx.execute(
                            "alter table complete_fences_2 add column if not exists last_write"
                                + " varchar(255)"))
                .isInstanceOf(DataAccessException.class)
                .hasMessageContaining("must be owner"));
  }

  /**
   * Runs {@code body} in one transaction as a fresh role that may use the schema and read and write
   * {@code table} but owns nothing; the transaction, the role with it, is rolled back afterwards.
   */
  private void asWriterRole(String table, Consumer<DSLContext> body) {
    String role = "nolock_fence_writer_" + UUID.randomUUID().toString().replace("-", "");
    RuntimeException rolledBack = new RuntimeException("roll back the role");
    assertThatThrownBy(
            () ->
                schema
                    .dsl()
                    .transaction(
                        c -> {
                          DSLContext tx = c.dsl();
                          tx.execute("create role " + role + " nologin");
                          tx.execute(
                              "grant usage on schema " + schema.schemaName() + " to " + role);
                          tx.execute("grant select, insert, update on " + table + " to " + role);
                          tx.execute("set local role " + role);
                          body.accept(tx);
                          throw rolledBack;
                        }))
        .isSameAs(rolledBack);
    assertThat(
            schema
                .dsl()
                .fetchCount(
                    org.jooq.impl.DSL.table("pg_roles"),
                    org.jooq.impl.DSL.field("rolname").eq(role)))
        .as("the role was rolled back")
        .isZero();
  }

  private int lastWriteColumns(String table) {
    return schema
        .dsl()
        .fetchSingle(
            "select count(*) from information_schema.columns where table_schema = ?"
                + " and table_name = ? and column_name = 'last_write'",
            schema.schemaName(),
            table)
        .get(0, Integer.class);
  }

  private static Lease lease(String lock, String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
