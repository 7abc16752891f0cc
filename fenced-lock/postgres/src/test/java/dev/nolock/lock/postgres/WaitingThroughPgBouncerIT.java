package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.testkit.PgBouncer;
import dev.nolock.testkit.PgBouncerExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting behind PgBouncer in transaction pooling with the default settings (listening on): the
 * LISTEN's self-test notification never arrives, the backend stops counting on wake-ups, and a
 * waiting acquire gives its place up and polls, as before the queue existed. A waiter first in line
 * that nobody wakes would otherwise leave the freed lock idle while it sleeps.
 */
@ExtendWith({PostgresExtension.class, PgBouncerExtension.class})
class WaitingThroughPgBouncerIT {

  private static final Duration TTL = Duration.ofSeconds(30);

  @Test
  void aWaiterBehindPgBouncerStopsQueueingWhenTheListenFailsAndStillGetsTheLock(
      PostgresSchema schema, PgBouncer pgBouncer) throws Exception {
    assertThat(pgBouncer.poolMode()).isEqualTo("transaction");
    String table = schema.schemaName() + ".pgb_locks";
    PostgresLockConfig config = PostgresLockConfig.custom().table(table).build();
    PostgresLockBackend.create(schema.dataSource(), config).createTableIfMissing();
    String name = "report-" + UUID.randomUUID();
    ExecutorService threads = Executors.newSingleThreadExecutor();
    try (HikariDataSource pool = pool(pgBouncer);
        PostgresLockBackend backend = PostgresLockBackend.create(pool, config);
        FencedLock holder = lock(backend);
        FencedLock waiter = lock(backend)) {
      HeldLock held = holder.tryAcquire(name, TTL).get();
      assertThat(backend.wakesWaiters()).as("before any listener ran").isTrue();

      Future<Either<NotAcquired, HeldLock>> waiting =
          threads.submit(() -> waiter.acquire(name, TTL, Duration.ofMinutes(1)));
      // The waiter's first refusal starts the listener, whose self-test then times out.
      await().atMost(Duration.ofSeconds(20)).until(() -> !backend.wakesWaiters());
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> placesOf(schema, table + PostgresLockConfig.WAITERS_SUFFIX, name) == 0);
      held.release();

      await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
      assertThat(waiting.get().isRight()).as("the polling waiter got the lock").isTrue();
      waiting.get().get().release();
    } finally {
      threads.shutdownNow();
    }
  }

  private static int placesOf(PostgresSchema schema, String waiters, String name) {
    return schema
        .dsl()
        .fetchCount(
            DSL.table(DSL.name(waiters.split("\\."))), DSL.field(DSL.name("name")).eq(name));
  }

  private static FencedLock lock(PostgresLockBackend backend) {
    return FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
  }

  private static HikariDataSource pool(PgBouncer pgBouncer) {
    HikariConfig pool = new HikariConfig();
    pool.setJdbcUrl(pgBouncer.jdbcUrl());
    pool.setMaximumPoolSize(4);
    pool.setMinimumIdle(0);
    pool.setPoolName("nolock-pgbouncer-waiting-it");
    return new HikariDataSource(pool);
  }
}
