package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.WriteId;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link Fence#createTableIfMissing} on the real PostgreSQL: it adds the write-id table next to a
 * fence table made by an earlier version, a role that does not own a complete schema can call it,
 * and concurrent creators both succeed.
 */
@ExtendWith(PostgresExtension.class)
class FenceSchemaIT {

  /** The fence table as versions without write ids created it. */
  private static final String OLDEST_DDL =
      "create table %s (name varchar(255) primary key, token bigint not null check (token > 0),"
          + " owner varchar(255) not null)";

  private static final int CREATOR_ROUNDS = 40;

  private final PostgresSchema schema;

  FenceSchemaIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @Test
  void aTableWithoutWriteIdsGetsItsWriteIdTableAndKeepsItsRows() {
    upgradesAndKeepsFencing(
        OLDEST_DDL,
        "oldest_fences",
        "insert into oldest_fences values" + " ('invoice-42', 7, 'A')");
  }

  private void upgradesAndKeepsFencing(String ddl, String table, String row) {
    DSLContext dsl = schema.dsl();
    dsl.execute(String.format(ddl, table));
    dsl.execute(row);
    Fence fence = Fence.onTable(table);

    fence.createTableIfMissing(dsl);
    fence.createTableIfMissing(dsl);

    assertThat(columns(table + "_writes"))
        .containsExactly("name", "write_id", "token", "owner", "written_at");
    assertThat(fence.write(dsl, lease("invoice-42", "B", 6), tx -> 1).isLeft())
        .as("the row written before the upgrade still fences")
        .isTrue();
    Lease lease = lease("invoice-42", "A", 8);
    assertThat(fence.write(dsl, lease, WriteId.of("w2"), tx -> 1).get().alreadyWritten()).isFalse();
    assertThat(fence.write(dsl, lease, WriteId.of("w2"), tx -> 1).get().alreadyWritten()).isTrue();
  }

  @Test
  void aSchemaQualifiedTableIsCreatedWithItsWriteIdTable() {
    Fence fence = Fence.onTable(schema.schemaName() + ".qualified_fences");

    fence.createTableIfMissing(schema.dsl());

    assertThat(columns("qualified_fences")).containsExactly("name", "token", "owner");
    assertThat(columns("qualified_fences_writes"))
        .containsExactly("name", "write_id", "token", "owner", "written_at");
  }

  @Test
  void aConfiguredWriteIdTableIsUsed() {
    Fence fence = Fence.onTables("named_fences", "named_fence_ids");
    fence.createTableIfMissing(schema.dsl());

    fence.write(schema.dsl(), lease("invoice-42", "A", 7), WriteId.of("w1"), tx -> 1);

    assertThat(schema.dsl().fetchCount(org.jooq.impl.DSL.table("named_fence_ids"))).isEqualTo(1);
    assertThat(columns("named_fences_writes")).isEmpty();
  }

  @Test
  void tableNamesThatCannotBeUsedAreRefusedWithTheFix() {
    assertThatThrownBy(() -> Fence.onTable("f".repeat(60)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Fence.onTables(fenceTable, writesTable)");
    assertThatThrownBy(() -> Fence.onTables("fences", "fences"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("its own name");
    assertThatThrownBy(() -> Fence.onTables("fences", "fence ids; drop"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("write-id table");
  }

  @Test
  void aRoleThatDoesNotOwnACompleteSchemaCanCallCreateTableIfMissing() {
    Fence fence = Fence.onTable("complete_fences");
    fence.createTableIfMissing(schema.dsl());

    asWriterRole(
        "complete_fences",
        tx -> {
          fence.createTableIfMissing(tx);
          assertThat(
                  fence
                      .write(tx, lease("invoice-42", "A", 7), WriteId.of("w1"), tx2 -> 1)
                      .isRight())
              .isTrue();
        });
  }

  @Test
  void negativeControlThatRoleIssuingTheCreateUnconditionallyFails() {
    Fence.onTable("complete_fences_2").createTableIfMissing(schema.dsl());

    asWriterRole(
        "complete_fences_2",
        tx ->
            assertThatThrownBy(
                    () ->
                        tx.execute(
                            "create table if not exists complete_fences_2_writes (name"
                                + " varchar(255))"))
                .isInstanceOf(DataAccessException.class)
                .hasMessageContaining("permission denied for schema"));
  }

  /**
   * Two processes starting at once on an empty schema both see the tables missing and both create
   * them; each round uses fresh table names. Neither may fail because the other created a table
   * first.
   */
  @Test
  void twoConcurrentCreatorsBothSucceed() throws Exception {
    ExecutorService creators = Executors.newFixedThreadPool(2);
    List<String> failures = new ArrayList<>();
    try {
      for (int round = 0; round < CREATOR_ROUNDS; round++) {
        Fence fence = Fence.onTable("racing_fences_" + round);
        CountDownLatch start = new CountDownLatch(1);
        List<Future<?>> calls = new ArrayList<>();
        for (int creator = 0; creator < 2; creator++) {
          calls.add(
              creators.submit(
                  () -> {
                    start.await();
                    fence.createTableIfMissing(schema.dsl());
                    return null;
                  }));
        }
        start.countDown();
        for (Future<?> call : calls) {
          try {
            call.get(30, TimeUnit.SECONDS);
          } catch (ExecutionException e) {
            failures.add("round " + round + ": " + e.getCause());
          }
        }
      }
    } finally {
      creators.shutdownNow();
    }

    assertThat(failures)
        .as(
            "createTableIfMissing calls that failed because a concurrent creator made the table"
                + " first, in %d rounds",
            CREATOR_ROUNDS)
        .isEmpty();
  }

  /**
   * Runs {@code body} in one transaction as a fresh role that may use the schema and read and write
   * {@code table} and its write-id table but owns nothing; the transaction, the role with it, is
   * rolled back afterwards.
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
                          tx.execute(
                              "grant select, insert, delete on " + table + "_writes to " + role);
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

  private List<String> columns(String table) {
    return schema
        .dsl()
        .fetch(
            "select column_name from information_schema.columns where table_schema = ?"
                + " and table_name = ? order by ordinal_position",
            schema.schemaName(),
            table)
        .getValues(0, String.class);
  }

  private static Lease lease(String lock, String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
