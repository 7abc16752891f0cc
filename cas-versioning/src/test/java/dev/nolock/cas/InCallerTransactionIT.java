package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The store inside the caller's own jOOQ transaction: no retry, nothing committed behind it. */
@ExtendWith(PostgresExtension.class)
class InCallerTransactionIT {

  private static final String TABLE = "counters";

  private final DSLContext dsl;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final VersionColumnStore<String, Long> store;

  InCallerTransactionIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
                .retryPolicy(RetryPolicy.custom().maxAttempts(50).build()) // must not be used
                .metrics(registry, "in-tx")
                .build());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  private static String newId(String prefix) {
    return prefix + "-" + UUID.randomUUID();
  }

  @Test
  void aConflictInTheCallersTransactionIsReturnedAtOnceAndItsEarlierWritesCanStillCommit() {
    String hot = newId("hot");
    String note = newId("note");
    Version v1 = store.insert(hot, 0L).get().version();
    Version v2 = Version.of(v1.asLong() + 1);
    AtomicInteger calls = new AtomicInteger();

    Either<Conflict, Versioned<Long>> outcome =
        dsl.transactionResult(
            configuration -> {
              VersionColumnStore<String, Long> tx = store.inTransaction(configuration.dsl());
              tx.insert(note, 7L).get(); // the caller's earlier write
              Either<Conflict, Versioned<Long>> result =
                  tx.update(
                      hot,
                      v -> {
                        calls.incrementAndGet();
                        Tables.bumpBehindTheStoresBack(dsl, TABLE, hot); // another connection
                        return v + 1;
                      });
              assertThat(tx.read(note)).as("still in the caller's hands").isNotEmpty();
              return result; // the caller decides to commit its other work anyway
            });

    assertThat(calls).as("no retry inside the caller's transaction").hasValue(1);
    assertThat(outcome.getLeft().current()).contains(v2);
    assertThat(store.read(note).get().value()).as("the earlier write committed").isEqualTo(7L);
    assertThat(store.read(hot).get()).isEqualTo(new Versioned<>(100L, v2));
    assertThat(count("nolock.cas.retries")).isZero();
    assertThat(count("nolock.cas.give_ups")).isZero();
  }

  @Test
  void aConflictInTheCallersTransactionLetsItRollBackItsEarlierWrites() {
    String hot = newId("hot");
    String note = newId("note");
    Version v1 = store.insert(hot, 0L).get().version();
    Tables.bumpBehindTheStoresBack(dsl, TABLE, hot);

    assertThatThrownBy(
            () ->
                dsl.transaction(
                    configuration -> {
                      VersionColumnStore<String, Long> tx =
                          store.inTransaction(configuration.dsl());
                      tx.insert(note, 7L).get();
                      Either<Conflict, Versioned<Long>> stale = tx.compareAndSet(hot, v1, 1L);
                      if (stale.isLeft()) {
                        throw new StaleInput(stale.getLeft());
                      }
                    }))
        .isInstanceOf(StaleInput.class);

    assertThat(store.read(note)).as("rolled back with the caller's transaction").isEmpty();
    assertThat(store.read(hot).get().version()).isEqualTo(Version.of(v1.asLong() + 1));
  }

  @Test
  void writesThroughTheViewCommitOnlyWithTheCallersTransaction() {
    String id = newId("batch");
    Version v1 = store.insert(id, 1L).get().version();

    assertThatThrownBy(
            () ->
                dsl.transaction(
                    configuration -> {
                      VersionColumnStore<String, Long> tx =
                          store.inTransaction(configuration.dsl());
                      Version v2 =
                          tx.compareAndSetAll(List.of(VersionedWrite.of(id, v1, 2L)))
                              .get(0)
                              .get()
                              .version();
                      assertThat(tx.delete(id, v2).isRight()).isTrue();
                      assertThat(store.read(id).get().value())
                          .as("not visible outside before the commit")
                          .isEqualTo(1L);
                      throw new IllegalStateException("roll back");
                    }))
        .hasMessageContaining("roll back");

    assertThat(store.read(id).get()).isEqualTo(new Versioned<>(1L, v1));
  }

  @Test
  void aContextThatIsNotInATransactionIsRefused() {
    VersionColumnStore<String, Long> notATransaction = store.inTransaction(dsl);

    assertThatThrownBy(() -> notATransaction.insert(newId("x"), 1L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("autocommit")
        .hasMessageContaining("dsl.transaction");
  }

  @Test
  void underRepeatableReadAChangeAfterTheSnapshotAbortsTheCallersTransactionWithAnException() {
    String id = newId("rr");
    Version v1 = store.insert(id, 1L).get().version();

    assertThatThrownBy(
            () ->
                dsl.transaction(
                    configuration -> {
                      DSLContext tx = configuration.dsl();
                      tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
                      VersionColumnStore<String, Long> view = store.inTransaction(tx);
                      assertThat(view.read(id).get().version()).isEqualTo(v1); // the snapshot
                      Tables.bumpBehindTheStoresBack(dsl, TABLE, id); // committed after it
                      view.update(id, v -> v + 1);
                    }))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("40001")
        .hasMessageContaining("roll it back")
        .hasCauseInstanceOf(DataAccessException.class);
    assertThat(store.read(id).get().value()).isEqualTo(101L);
  }

  private double count(String name) {
    return registry.get(name).tag("component", "store").tag("name", "in-tx").counter().count();
  }

  /** The caller's own way to roll back on a conflict. */
  private static final class StaleInput extends RuntimeException {
    private static final long serialVersionUID = 1L;

    StaleInput(Conflict conflict) {
      super("stale: " + conflict);
    }
  }
}
