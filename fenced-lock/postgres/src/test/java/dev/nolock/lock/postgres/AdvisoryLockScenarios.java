package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.unquotedName;

import io.vavr.control.Option;
import java.io.IOException;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What {@link PostgresAdvisoryLock} promises, run directly against PostgreSQL and through PgBouncer
 * by the subclasses.
 */
abstract class AdvisoryLockScenarios {

  private static final long WAIT_SECONDS = 20;

  private final ExecutorService holderThread = Executors.newSingleThreadExecutor();
  private final String prefix = "advisory-" + UUID.randomUUID() + "-";

  /** Where the transactions run. */
  protected abstract DSLContext dsl();

  @AfterEach
  void stopHolder() {
    holderThread.shutdownNow();
  }

  @Test
  void aKeyHeldByAnOpenTransactionIsRefusedUntilItCommits() throws Exception {
    String key = prefix + "K";
    String otherKey = prefix + "L";
    CountDownLatch holding = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);

    CompletableFuture<Option<String>> first =
        CompletableFuture.supplyAsync(
            () ->
                PostgresAdvisoryLock.tryInTransaction(
                    dsl(),
                    key,
                    tx -> {
                      holding.countDown();
                      awaitQuietly(finish);
                      return "first";
                    }),
            holderThread);
    assertThat(holding.await(WAIT_SECONDS, TimeUnit.SECONDS)).as("first took the lock").isTrue();

    assertThat(PostgresAdvisoryLock.tryInTransaction(dsl(), key, tx -> "second"))
        .as("same key while the first transaction is open")
        .isEqualTo(Option.none());
    assertThat(PostgresAdvisoryLock.tryInTransaction(dsl(), otherKey, tx -> "other"))
        .as("another key")
        .isEqualTo(Option.some("other"));

    finish.countDown();
    assertThat(first.get(WAIT_SECONDS, TimeUnit.SECONDS)).isEqualTo(Option.some("first"));
    assertThat(PostgresAdvisoryLock.tryInTransaction(dsl(), key, tx -> "third"))
        .as("after the first transaction committed")
        .isEqualTo(Option.some("third"));
  }

  @Test
  void theWorkRunsInTheTransactionThatHoldsTheLock() {
    String key = prefix + "same-tx";
    Field<Integer> backendPid = function(unquotedName("pg_backend_pid"), SQLDataType.INTEGER);

    Option<Long> heldByThisBackend =
        PostgresAdvisoryLock.tryInTransaction(
            dsl(),
            key,
            tx ->
                tx.selectCount()
                    .from(table(name("pg_catalog", "pg_locks")))
                    .where(field(name("locktype"), SQLDataType.VARCHAR).eq("advisory"))
                    .and(field(name("granted"), SQLDataType.BOOLEAN).isTrue())
                    .and(field(name("pid"), SQLDataType.INTEGER).eq(backendPid))
                    .fetchSingle()
                    .value1()
                    .longValue());

    assertThat(heldByThisBackend.get()).as("advisory locks of the work's own backend").isOne();
  }

  @Test
  void aThrowingWorkPropagatesUnchangedAndReleasesTheKey() {
    String key = prefix + "throws";
    IllegalStateException boom = new IllegalStateException("boom");

    assertThatThrownBy(
            () ->
                PostgresAdvisoryLock.tryInTransaction(
                    dsl(),
                    key,
                    tx -> {
                      throw boom;
                    }))
        .isSameAs(boom);
    assertThat(PostgresAdvisoryLock.tryInTransaction(dsl(), key, tx -> "again"))
        .isEqualTo(Option.some("again"));
  }

  /**
   * The work may throw a checked exception: it comes out unchanged (the same instance, caught by
   * its own type) after the rollback, which undoes the work's writes and releases the key.
   */
  @Test
  void aCheckedExceptionFromTheWorkComesOutUnchangedAfterTheRollback() {
    String key = prefix + "throws-checked";
    dsl().execute("create table if not exists advisory_effects (key text primary key)");
    Field<String> effectKey = field(name("key"), SQLDataType.VARCHAR);
    IOException unreachable = new IOException("the ledger did not answer");

    IOException caught = null;
    try {
      PostgresAdvisoryLock.tryInTransaction(
          dsl(),
          key,
          tx -> {
            tx.insertInto(table(name("advisory_effects")), effectKey).values(key).execute();
            throw unreachable;
          });
    } catch (IOException thrown) {
      caught = thrown;
    }

    assertThat(caught).as("the work's own exception, the same instance").isSameAs(unreachable);
    assertThat(dsl().fetchCount(table(name("advisory_effects")), effectKey.eq(key)))
        .as("the work's write, rolled back")
        .isZero();
    assertThat(PostgresAdvisoryLock.tryInTransaction(dsl(), key, tx -> "again"))
        .as("the key, released by the rollback")
        .isEqualTo(Option.some("again"));
  }

  private static void awaitQuietly(CountDownLatch latch) {
    try {
      if (!latch.await(WAIT_SECONDS, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the test never let the holder finish");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
