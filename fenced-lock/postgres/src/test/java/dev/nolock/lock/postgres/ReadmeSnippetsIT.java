package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.nio.file.Path;
import java.time.Duration;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's usage snippet, kept compiling and running. */
@ExtendWith(PostgresExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  private static final String INVOICES_DDL =
      "CREATE TABLE IF NOT EXISTS invoices (id int PRIMARY KEY, status text NOT NULL)";

  @Test
  void theReadmeSnippetPaysTheInvoiceOnceUnderTheLockAndTheFence(PostgresSchema schema) {
    schema.dsl().execute(INVOICES_DDL);
    schema.dsl().execute("INSERT INTO invoices VALUES (42, 'open')");
    DataSource pool = schema.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();

    // --- README: Usage ---
    PostgresLockBackend backend = PostgresLockBackend.create(pool); // table nolock_locks
    backend.createTableIfMissing();
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    Fence fence = Fence.onTable("nolock_fences", registry, "billing");
    fence.createTableIfMissing(dsl);

    try (FencedLock locks =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .metrics(registry, "billing")
                .onLeaseLost(lost -> System.err.println("stop paying " + lost.name())) // stop work
                .build())) {

      Either<NotAcquired, Either<FenceRejection, Integer>> outcome =
          locks.withLock(
              "invoice-42",
              Duration.ofSeconds(10), // TTL, renewed by the watchdog every TTL/3
              Duration.ofSeconds(5), // how long to wait for the lock
              held -> {
                held.checkPointOfNoReturn(Duration.ofMillis(200)); // before every write
                return fence.write(
                    dsl,
                    held.lease(),
                    tx ->
                        tx.update(table(name("invoices")))
                            .set(field(name("status")), "paid")
                            .where(field(name("id")).eq(42))
                            .execute());
              });

      outcome
          .peekLeft(busy -> System.err.println("someone else is paying it: " + busy))
          .peek(written -> written.peekLeft(stale -> System.err.println(stale.describe())));
      // --- end of snippet ---

      assertThat(outcome).isEqualTo(Either.right(Either.right(1)));
    }
    assertThat(schema.dsl().fetchValue("SELECT status FROM invoices WHERE id = 42"))
        .isEqualTo("paid");
  }

  @Test
  void theReadmeAdvisorySnippetRunsTheWorkWhenTheKeyIsFree(PostgresSchema schema) {
    schema.dsl().execute(INVOICES_DDL);
    schema.dsl().execute("INSERT INTO invoices VALUES (43, 'open')");
    DSLContext dsl = schema.dsl();

    // --- README: Usage, advisory lock ---
    Option<Integer> paid =
        PostgresAdvisoryLock.tryInTransaction(
            dsl,
            "invoice-43",
            tx ->
                tx.update(table(name("invoices")))
                    .set(field(name("status")), "paid")
                    .where(field(name("id")).eq(43))
                    .execute());
    // --- end of snippet ---

    assertThat(paid).isEqualTo(Option.some(1));
  }

  @Test
  void theReadmeUnnamespacedSnippetRunsTheWorkWhenTheKeyIsFree(PostgresSchema schema) {
    schema.dsl().execute(INVOICES_DDL);
    schema.dsl().execute("INSERT INTO invoices VALUES (44, 'open')");
    DSLContext dsl = schema.dsl();

    // --- README: Usage, advisory lock, unnamespaced ---
    Option<Integer> paidBeside =
        PostgresAdvisoryLock.tryInTransaction(
            dsl,
            AdvisoryLockNamespace.unnamespaced(),
            "invoice-44",
            tx ->
                tx.update(table(name("invoices")))
                    .set(field(name("status")), "paid")
                    .where(field(name("id")).eq(44))
                    .execute());
    // --- end of snippet ---

    assertThat(paidBeside).isEqualTo(Option.some(1));
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheUnnamespacedTestRuns() {
    ReadmeSnippet.javaBlock(README, "To exclude code that already locks another framing")
        .readmeOnly(
            "// excludes existing code that runs SELECT pg_advisory_xact_lock(hashtextextended("
                + "'invoice-44', 0))")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage, advisory lock, unnamespaced");
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheUsageTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .replacing("// a HikariCP DataSource; table nolock_locks", "// table nolock_locks")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheAdvisoryTestRuns() {
    ReadmeSnippet.javaBlock(README, "A critical section that fits in one transaction")
        .readmeOnly(
            "// Option.none(): another transaction is working on invoice-43 right now; nothing ran")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage, advisory lock");
  }
}
