package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.lettuce.core.ClientOptions;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Either;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What a Redis restart without persistence does to the lock: every lease and every token counter is
 * lost, so tokens start again at 1. Safety holds because the SQL {@link Fence} remembers the
 * highest token it accepted and refuses the reissued ones; liveness needs the counter raised past
 * the fence again ({@link RedisLockBackend#ensureTokensAbove}).
 *
 * <p>Runs a private {@code redis-server} child process (no RDB, no AOF) that each test kills and
 * starts again on the same port; the backend keeps its one connection, which Lettuce reconnects.
 */
@ExtendWith(PostgresExtension.class)
class RedisRestartWithoutPersistenceIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final AtomicInteger LOCKS = new AtomicInteger();
  private static final Table<?> ENTRIES = table(name("entries"));
  private static final Field<String> LOCK = field(name("lock_name"), String.class);
  private static final Field<String> VALUE = field(name("value"), String.class);
  private static final Field<String> FENCE_NAME = field(name("name"), String.class);
  private static final Field<Long> FENCE_TOKEN = field(name("token"), Long.class);

  private static PrivateRedisServer server;
  private static RedisClient client;
  private static StatefulRedisConnection<String, String> connection;
  private static RedisLockBackend backend;
  private static DSLContext dsl;
  private static Fence fence;

  private final FenceAuditor auditor = new FenceAuditor();
  private String lock;

  @BeforeAll
  static void start(PostgresSchema schema) throws IOException {
    dsl = schema.dsl();
    fence = Fence.onTable("nolock_fences");
    fence.createTableIfMissing(dsl);
    dsl.execute("create table entries (lock_name varchar(255) primary key, value text not null)");
    server = PrivateRedisServer.start();
    client = RedisClient.create(server.uri());
    connection = client.connect();
    backend = RedisLockBackend.create(connection);
  }

  @AfterAll
  static void stop() throws IOException {
    if (client != null) {
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
    if (server != null) {
      server.close();
    }
  }

  @BeforeEach
  void runningServerAndFreshLock() {
    if (!server.isRunning()) {
      server.startProcess();
    }
    awaitBackendConnected();
    lock = "invoice-" + LOCKS.incrementAndGet();
  }

  @Test
  void afterARestartTheCounterStartsAgainAndTheFenceRefusesTheReissuedLowerToken() {
    FencingToken a = holderATakesTokensOneTwoThreeAndWritesWithTheLast();

    restartRedis();
    FencingToken b = backend.tryAcquire(lock, "B", TTL).get();

    assertThat(b).as("the counter was lost").isEqualTo(FencingToken.of(1));
    Either<FenceRejection, Integer> written = write(lease("B", b), "B's value");
    assertThat(auditor.attempts("B")).as("B's write was attempted").isEqualTo(1);
    assertThat(auditor.refusals("B")).isEqualTo(1);
    assertThat(written.getLeft()).isEqualTo(new FenceRejection(lock, b, "B", a, "A"));
    auditor.assertNoStaleWriteAccepted();
    assertThat(storedValue()).isEqualTo("A's value");
  }

  @Test
  void afterARestartTheSameTokenReissuedToAnotherOwnerIsRefused() {
    FencingToken a = backend.tryAcquire(lock, "A", TTL).get();
    assertThat(a).isEqualTo(FencingToken.of(1));
    assertThat(write(lease("A", a), "A's value").isRight()).isTrue();

    restartRedis();
    FencingToken b = backend.tryAcquire(lock, "B", TTL).get();

    assertThat(b).as("B gets A's token again").isEqualTo(a);
    Either<FenceRejection, Integer> written = write(lease("B", b), "B's value");
    assertThat(auditor.attempts("B")).isEqualTo(1);
    assertThat(written.getLeft()).isEqualTo(new FenceRejection(lock, b, "B", a, "A"));
    auditor.assertNoStaleWriteAccepted();
    assertThat(storedValue()).isEqualTo("A's value");
  }

  @Test
  void negativeControlWithoutTheFenceTheReissuedTokenOverwritesAndIsCaught() {
    FencingToken a = holderATakesTokensOneTwoThreeAndWritesWithTheLast();

    restartRedis();
    FencingToken b = backend.tryAcquire(lock, "B", TTL).get();
    auditor.attempted(lock, b, "B");
    dsl.update(ENTRIES).set(VALUE, "B's value").where(LOCK.eq(lock)).execute();
    auditor.accepted(lock, b, "B");

    assertThat(b.isNewerThan(a)).isFalse();
    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
    assertThat(storedValue()).isEqualTo("B's value");
  }

  @Test
  void raisingTheCounterFromTheFenceRestoresProgressAfterARestart() {
    FencingToken a = holderATakesTokensOneTwoThreeAndWritesWithTheLast();
    restartRedis();
    FencingToken reissued = backend.tryAcquire(lock, "B", TTL).get();
    assertThat(write(lease("B", reissued), "B's value").isLeft()).as("before the remedy").isTrue();
    assertThat(backend.release(lock, "B", reissued)).isTrue();

    long highest =
        dsl.select(FENCE_TOKEN)
            .from(table(name("nolock_fences")))
            .where(FENCE_NAME.eq(lock))
            .fetchSingle(FENCE_TOKEN);
    assertThat(backend.ensureTokensAbove(lock, highest)).isEqualTo(a.value());
    FencingToken b = backend.tryAcquire(lock, "B", TTL).get();

    assertThat(b.isNewerThan(a)).as("B's token %s is above A's %s", b, a).isTrue();
    assertThat(write(lease("B", b), "B's value").isRight()).isTrue();
    assertThat(storedValue()).isEqualTo("B's value");
    assertThat(auditor.refusals("B")).isEqualTo(1);
    assertThat(auditor.acceptances("B")).isEqualTo(1);
    auditor.assertNoStaleWriteAccepted();
  }

  @Test
  void whileRedisIsDownCallsFailWithBackendUnavailable() {
    RedisClient failFast = RedisClient.create(server.uri());
    failFast.setOptions(ClientOptions.builder().autoReconnect(false).build());
    try (StatefulRedisConnection<String, String> direct = failFast.connect()) {
      RedisLockBackend unreachable = RedisLockBackend.create(direct);
      FencingToken token = unreachable.tryAcquire(lock, "A", TTL).get();

      server.kill();

      assertThatThrownBy(() -> unreachable.tryAcquire(lock, "B", TTL))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("retry later");
      assertThatThrownBy(() -> unreachable.renew(lock, "A", token, TTL))
          .isInstanceOf(BackendUnavailableException.class);
      assertThatThrownBy(() -> unreachable.release(lock, "A", token))
          .isInstanceOf(BackendUnavailableException.class);
    } finally {
      failFast.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
  }

  /** A acquires and releases tokens 1 and 2, acquires 3 and writes with it through the fence. */
  private FencingToken holderATakesTokensOneTwoThreeAndWritesWithTheLast() {
    List<FencingToken> tokens = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      FencingToken token = backend.tryAcquire(lock, "A", TTL).get();
      tokens.add(token);
      if (i < 2) {
        assertThat(backend.release(lock, "A", token)).isTrue();
      }
    }
    assertThat(tokens).extracting(FencingToken::value).containsExactly(1L, 2L, 3L);
    FencingToken last = tokens.get(2);
    assertThat(write(lease("A", last), "A's value").isRight()).isTrue();
    return last;
  }

  /** SIGKILL, wait for the exit, start on the same port; the backend's connection reconnects. */
  private static void restartRedis() {
    server.restart();
    awaitBackendConnected();
  }

  private static void awaitBackendConnected() {
    await("the backend's connection is back")
        .atMost(Duration.ofSeconds(30))
        .ignoreExceptions()
        .until(() -> "PONG".equals(connection.sync().ping()));
  }

  private Either<FenceRejection, Integer> write(Lease lease, String value) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Either<FenceRejection, Integer> result =
        fence.write(
            dsl,
            lease,
            tx ->
                tx.insertInto(ENTRIES, LOCK, VALUE)
                    .values(lease.name(), value)
                    .onConflict(LOCK)
                    .doUpdate()
                    .set(VALUE, value)
                    .execute());
    if (result.isRight()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return result;
  }

  private String storedValue() {
    return dsl.select(VALUE).from(ENTRIES).where(LOCK.eq(lock)).fetchSingle(VALUE);
  }

  private Lease lease(String owner, FencingToken token) {
    LeaseClock clock = LeaseClock.system();
    return new Lease(lock, owner, token, Deadline.forHolder(clock, clock.nanoTime(), TTL));
  }
}
