package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.nio.file.Path;
import java.util.List;
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

  @Test
  void theReadmeSnippetRuns(PostgresSchema schema) {
    schema
        .dsl()
        .execute(
            "CREATE TABLE accounts (id text PRIMARY KEY, version bigint NOT NULL DEFAULT 1, balance"
                + " bigint NOT NULL)");
    schema.dsl().execute("CREATE TABLE audit (account text NOT NULL, note text NOT NULL)");
    DataSource pool = schema.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();

    // --- README: Usage ---
    VersionColumnStore<String, Long> accounts =
        VersionColumnStore.create(
            pool, // a HikariCP DataSource
            VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs())
                .valueColumn("balance") // key column "id" and version column "version": defaults
                .metrics(registry, "accounts")
                .build());

    accounts.insert("alice", 100L); // a fresh version; a Conflict if alice exists already

    // Read, apply, compare-and-set; a lost race is retried with jittered backoff.
    Either<Conflict, Versioned<Long>> paid = accounts.update("alice", balance -> balance - 30);
    paid.peekLeft(lost -> System.err.println("gave up; alice is at " + lost.current()));

    // A write based on a version you hold, e.g. one a client sent back with its edit.
    Versioned<Long> seen = accounts.read("alice").get();
    Either<Conflict, Versioned<Long>> set = accounts.compareAndSet("alice", seen.version(), 60L);

    // Many rows in one transaction, an outcome per row.
    List<Either<Conflict, Versioned<Long>>> outcomes =
        accounts.compareAndSetAll(
            List.of(
                VersionedWrite.of("alice", set.get().version(), 50L),
                VersionedWrite.of("bob", Version.of(1), 5L))); // no bob: a conflict, isMissing()

    // Inside your own transaction: one attempt, the conflict comes back at once.
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.transaction(
        configuration -> {
          DSLContext tx = configuration.dsl();
          accounts
              .inTransaction(tx)
              .update("alice", balance -> balance + 1)
              .getOrElseThrow(lost -> new IllegalStateException("alice changed: " + lost));
          tx.insertInto(table(name("audit")), field(name("account")), field(name("note")))
              .values("alice", "+1")
              .execute(); // commits with the update, or rolls back with it
        });
    // --- end of snippet ---

    long first = paid.get().version().asLong() - 1; // drawn by the insert, then +1 per change
    assertThat(first).isBetween(1L << 32, 1L << 62);
    assertThat(paid.get()).isEqualTo(new Versioned<>(70L, Version.of(first + 1)));
    assertThat(set.get()).isEqualTo(new Versioned<>(60L, Version.of(first + 2)));
    assertThat(outcomes.get(0).get()).isEqualTo(new Versioned<>(50L, Version.of(first + 3)));
    assertThat(outcomes.get(1).getLeft().isMissing()).isTrue();
    assertThat(accounts.read("alice").get()).isEqualTo(new Versioned<>(51L, Version.of(first + 4)));
    assertThat(schema.dsl().fetchCount(table(name("audit")))).isEqualTo(1);
    assertThat(registry.get("nolock.cas.attempts").tag("name", "accounts").counter().count())
        .isEqualTo(6); // insert, update, compareAndSet, two batch rows, update in the transaction
  }

  /** The README shows the code the test above runs; the test creates the table itself. */
  @Test
  void theReadmeShowsTheCodeTheTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "// CREATE TABLE accounts (id text PRIMARY KEY, version bigint NOT NULL DEFAULT 1, //  "
                + "                      balance bigint NOT NULL);")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }
}
