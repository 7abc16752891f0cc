package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Either;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link RedisFence} on the same Redis as the lock, when that Redis loses state: a restart without
 * persistence, {@code FLUSHALL}, {@code FLUSHDB}, an eviction of the fence under {@code maxmemory},
 * a failover to a replica that lacks the latest fence. Each cause is run twice: through {@code
 * RedisFence}, and through the same fenced write without loss detection ({@link
 * FenceWithoutLossDetection}, the negative control), which accepts the stale holder's write. Then
 * what the operator does: re-establish above the highest token in use, or, after a restart that
 * lost nothing, resume with the surviving state.
 *
 * <p>Every test runs private {@code redis-server} processes ({@link PrivateRedisServer}); the
 * shared Redis is never flushed, restarted or reconfigured.
 */
class RedisFenceStateLossIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final Duration SHORT_TTL = Duration.ofMillis(1_000);
  private static final String LOCK = "invoice-42";
  private static final String DATA = "invoice:42:status";
  private static final String FENCE_PREFIX = "app:fence:";
  private static final RedisFenceConfig FENCE_CONFIG =
      RedisFenceConfig.custom().keyPrefix(FENCE_PREFIX).build();

  private final List<AutoCloseable> resources = new ArrayList<>();
  private final FenceAuditor auditor = new FenceAuditor();

  /**
   * What one write came back with.
   *
   * @param notEstablished why {@code RedisFence} refused every write, or null
   */
  record Attempt(
      boolean accepted, String detail, FenceNotEstablishedException.Reason notEstablished) {}

  /** How the test's writes pass the fence: {@code RedisFence}, or the control. */
  private interface Guard {
    /** The operator's step before the fence is first used on a Redis. */
    void establishOnce();

    Attempt write(Lease lease, String key, String value);

    /** The keys whose loss is the fault under test. */
    List<String> stateKeys();
  }

  /** The outcome of one scenario; {@code bWrite} is B's first write after the loss. */
  record Run(
      String cause,
      FencingToken aToken,
      FencingToken bToken,
      Attempt bWrite,
      Attempt aLateWrite,
      String dataAfter) {}

  @AfterEach
  void closeEverything() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
  }

  // --- restart without persistence ---

  @Test
  void afterARestartWithoutPersistenceTheStaleHoldersWriteIsRefused() throws IOException {
    Run run = lossOnOneServer(Cause.RESTART, RedisFenceStateLossIT::fenced);
    assertStaleWriteRefused(run, FenceNotEstablishedException.Reason.NO_STATE);
  }

  @Test
  void negativeControlAfterARestartWithoutLossDetectionBothHoldersWrite() throws IOException {
    assertBothHoldersWrote(lossOnOneServer(Cause.RESTART, RedisFenceStateLossIT::unguarded));
  }

  // --- FLUSHALL ---

  @Test
  void afterFlushAllTheStaleHoldersWriteIsRefused() throws IOException {
    Run run = lossOnOneServer(Cause.FLUSHALL, RedisFenceStateLossIT::fenced);
    assertStaleWriteRefused(run, FenceNotEstablishedException.Reason.NO_STATE);
  }

  @Test
  void negativeControlAfterFlushAllWithoutLossDetectionBothHoldersWrite() throws IOException {
    assertBothHoldersWrote(lossOnOneServer(Cause.FLUSHALL, RedisFenceStateLossIT::unguarded));
  }

  // --- FLUSHDB ---

  @Test
  void afterFlushDbTheStaleHoldersWriteIsRefused() throws IOException {
    Run run = lossOnOneServer(Cause.FLUSHDB, RedisFenceStateLossIT::fenced);
    assertStaleWriteRefused(run, FenceNotEstablishedException.Reason.NO_STATE);
  }

  @Test
  void negativeControlAfterFlushDbWithoutLossDetectionBothHoldersWrite() throws IOException {
    assertBothHoldersWrote(lossOnOneServer(Cause.FLUSHDB, RedisFenceStateLossIT::unguarded));
  }

  // --- eviction ---

  @Test
  void afterTheFenceIsEvictedTheStaleHoldersWriteIsRefused() throws IOException {
    Run run = eviction(RedisFenceStateLossIT::fenced);
    assertStaleWriteRefused(run, FenceNotEstablishedException.Reason.NO_STATE);
  }

  @Test
  void negativeControlAfterAnEvictionWithoutLossDetectionTheStaleHolderWrites() throws IOException {
    assertBothHoldersWrote(eviction(RedisFenceStateLossIT::unguarded));
  }

  // --- failover ---

  @Test
  void afterAFailoverToALaggingReplicaTheStaleHoldersWriteIsRefused() throws IOException {
    Run run = failover(RedisFenceStateLossIT::fenced);
    assertStaleWriteRefused(run, FenceNotEstablishedException.Reason.ESTABLISHED_ON_ANOTHER_SERVER);
  }

  @Test
  void negativeControlAfterAFailoverWithoutLossDetectionBothHoldersWrite() throws IOException {
    assertBothHoldersWrote(failover(RedisFenceStateLossIT::unguarded));
  }

  // --- re-establishing ---

  @Test
  void reestablishingAboveTheHighestTokenInUseLetsANewHolderWriteAndStillRefusesTheStaleOne()
      throws IOException {
    PrivateRedisServer server = track(PrivateRedisServer.start());
    StatefulRedisConnection<String, String> connection = connect(server);
    RedisLockBackend backend = RedisLockBackend.create(connection);
    RedisFence fence = RedisFence.create(connection, FENCE_CONFIG);
    fence.establish(0);
    FencingToken a = takeTokensUpTo(backend, 5, TTL);
    assertThat(fence.write(lease("A", a), DATA, "A").isRight()).isTrue();
    connection.sync().flushall();

    // The operator: A's token 5 is the highest in use (from the application's records).
    fence.establish(a.value());

    FencingToken reissued = backend.tryAcquire(LOCK, "B", TTL).get();
    assertThat(reissued).isEqualTo(FencingToken.of(1));
    Either<FenceRejection, Void> belowTheFloor = recorded(fence, lease("B", reissued), "B");
    assertThat(belowTheFloor.getLeft())
        .isEqualTo(new FenceRejection(LOCK, reissued, "B", a, RedisFence.FLOOR_OWNER));
    // The remedy the rejection asks for: raise the counter above the floor, acquire again.
    assertThat(backend.ensureTokensAbove(LOCK, belowTheFloor.getLeft().currentToken().value()))
        .isEqualTo(5);
    assertThat(backend.release(LOCK, "B", reissued)).isTrue();
    FencingToken b = backend.tryAcquire(LOCK, "B, again", TTL).get();

    assertThat(b).isEqualTo(FencingToken.of(6));
    assertThat(recorded(fence, lease("B, again", b), "B").isRight()).isTrue();
    Either<FenceRejection, Void> stale = recorded(fence, lease("A", a), "A, late");
    assertThat(auditor.attempts("A")).as("A's late write was attempted").isEqualTo(1);
    assertThat(stale.getLeft().currentToken()).isEqualTo(b);
    assertThat(connection.sync().get(DATA)).isEqualTo("B");
    auditor.assertNoStaleWriteAccepted();
  }

  @Test
  void aFloorBelowTheFencesFloorIsRefused() throws IOException {
    PrivateRedisServer server = track(PrivateRedisServer.start());
    RedisFence fence = RedisFence.create(connect(server), FENCE_CONFIG);
    fence.establish(5);

    assertThatThrownBy(() -> fence.establish(3))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("already has the floor 5")
        .hasMessageContaining("Pass 5 or more");
    fence.establish(5);
    fence.establish(7);
  }

  @Test
  void afterARestartThatKeptEveryWriteTheOperatorResumesAndTheEntriesStillFence()
      throws IOException {
    PrivateRedisServer server =
        track(PrivateRedisServer.start("--appendonly", "yes", "--appendfsync", "always"));
    StatefulRedisConnection<String, String> connection = connect(server);
    RedisLockBackend backend = RedisLockBackend.create(connection);
    RedisFence fence = RedisFence.create(connection, FENCE_CONFIG);
    fence.establish(0);
    FencingToken a = takeTokensUpTo(backend, 5, TTL);
    assertThat(recorded(fence, lease("A", a), "A").isRight()).isTrue();
    assertThat(backend.release(LOCK, "A", a)).isTrue();
    String runIdBefore = runId(connection.sync());

    server.restart();
    awaitConnected(connection);
    assertThat(runId(connection.sync())).as("a new server process").isNotEqualTo(runIdBefore);
    FencingToken b = backend.tryAcquire(LOCK, "B", TTL).get();
    assertThat(b).as("the counter survived: the AOF kept it").isEqualTo(FencingToken.of(6));
    assertThatThrownBy(() -> fence.write(lease("B", b), DATA, "B"))
        .isInstanceOf(FenceNotEstablishedException.class)
        .satisfies(
            e ->
                assertThat(((FenceNotEstablishedException) e).reason())
                    .isEqualTo(FenceNotEstablishedException.Reason.ESTABLISHED_ON_ANOTHER_SERVER));

    fence.resumeWithSurvivingState();

    assertThat(recorded(fence, lease("B", b), "B").isRight()).isTrue();
    Either<FenceRejection, Void> stale = recorded(fence, lease("A", a), "A, late");
    assertThat(auditor.attempts("A")).isEqualTo(2);
    assertThat(stale.getLeft().currentToken())
        .as("A's entry survived and still fences")
        .isEqualTo(b);
    auditor.assertNoStaleWriteAccepted();
  }

  @Test
  void resumingWithNothingThatSurvivedIsRefused() throws IOException {
    PrivateRedisServer server = track(PrivateRedisServer.start());
    StatefulRedisConnection<String, String> connection = connect(server);
    RedisFence fence = RedisFence.create(connection, FENCE_CONFIG);
    fence.establish(0);
    connection.sync().flushall();

    assertThatThrownBy(fence::resumeWithSurvivingState)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("Call establish(floor)");
    assertThatThrownBy(() -> fence.write(lease("A", FencingToken.of(1)), DATA, "A"))
        .isInstanceOf(FenceNotEstablishedException.class);
  }

  // --- assertions ---

  private void assertStaleWriteRefused(Run run, FenceNotEstablishedException.Reason reason) {
    assertThat(auditor.attempts("A")).as("A's late write was attempted").isEqualTo(2);
    assertThat(run.aLateWrite().accepted())
        .as(
            "stale holder A's write with token %d after %s, B (token %d) having written: refused",
            run.aToken().value(), run.cause(), run.bToken().value())
        .isFalse();
    assertThat(auditor.refusals("A")).isEqualTo(1);
    assertThat(run.aLateWrite().notEstablished()).as(run.aLateWrite().detail()).isEqualTo(reason);
    assertThat(run.bWrite().notEstablished())
        .as("B too is refused until an operator re-establishes")
        .isEqualTo(reason);
    assertThat(run.dataAfter()).isNotEqualTo("A, late");
    auditor.assertNoStaleWriteAccepted();
  }

  private void assertBothHoldersWrote(Run run) {
    assertThat(auditor.attempts("A")).isEqualTo(2);
    assertThat(run.bWrite().accepted()).as("B's write after %s", run.cause()).isTrue();
    assertThat(run.aLateWrite().accepted())
        .as("stale holder A's write after %s (the lost update)", run.cause())
        .isTrue();
    assertThat(run.dataAfter()).as("B's write was overwritten").isEqualTo("A, late");
  }

  // --- scenarios ---

  private enum Cause {
    RESTART("a restart without persistence"),
    FLUSHALL("FLUSHALL"),
    FLUSHDB("FLUSHDB");

    final String description;

    Cause(String description) {
      this.description = description;
    }
  }

  /**
   * A takes tokens 1 to 5 and writes with 5; Redis loses everything ({@code cause}); B acquires
   * (token 1 again: the counter went too) and writes; A, which still believes it holds, writes.
   */
  private Run lossOnOneServer(
      Cause cause, Function<StatefulRedisConnection<String, String>, Guard> guardOn)
      throws IOException {
    PrivateRedisServer server = track(PrivateRedisServer.start());
    StatefulRedisConnection<String, String> connection = connect(server);
    RedisLockBackend backend = RedisLockBackend.create(connection);
    Guard guard = guardOn.apply(connection);
    guard.establishOnce();
    RedisCommands<String, String> redis = connection.sync();

    FencingToken a = takeTokensUpTo(backend, 5, TTL);
    assertThat(write(guard, lease("A", a), "A").accepted()).isTrue();
    String runIdBefore = runId(redis);

    switch (cause) {
      case RESTART -> {
        server.restart();
        awaitConnected(connection);
        assertThat(runId(redis)).as("a new server process").isNotEqualTo(runIdBefore);
      }
      case FLUSHALL -> redis.flushall();
      case FLUSHDB -> redis.flushdb();
    }
    assertThat(redis.exists(guard.stateKeys().toArray(String[]::new)))
        .as("the fault fired: the fence's state is gone")
        .isZero();

    FencingToken b = backend.tryAcquire(LOCK, "B", TTL).get();
    assertThat(b).as("the token counter was lost too").isEqualTo(FencingToken.of(1));
    Attempt bWrite = write(guard, lease("B", b), "B");
    Attempt aLate = write(guard, lease("A", a), "A, late");
    return new Run(cause.description, a, b, bWrite, aLate, redis.get(DATA));
  }

  /**
   * A writes with token 5; its lease runs out; B takes token 6 and writes; under {@code maxmemory}
   * with {@code allkeys-lru} Redis evicts the fence; A, back from a pause, writes with 5; then B
   * writes again (the run's B write).
   */
  private Run eviction(Function<StatefulRedisConnection<String, String>, Guard> guardOn)
      throws IOException {
    PrivateRedisServer server =
        track(PrivateRedisServer.start("--maxmemory-policy", "allkeys-lru"));
    StatefulRedisConnection<String, String> connection = connect(server);
    RedisLockBackend backend = RedisLockBackend.create(connection);
    Guard guard = guardOn.apply(connection);
    guard.establishOnce();
    RedisCommands<String, String> redis = connection.sync();

    FencingToken a = takeTokensUpTo(backend, 5, SHORT_TTL);
    assertThat(write(guard, lease("A", a), "A").accepted()).isTrue();
    FencingToken b =
        await("A's lease runs out and B acquires")
            .atMost(Duration.ofSeconds(10))
            .pollInterval(Duration.ofMillis(50))
            .until(() -> backend.tryAcquire(LOCK, "B", TTL).getOrNull(), t -> t != null);
    assertThat(b).isEqualTo(FencingToken.of(6));
    Attempt bWrite = write(guard, lease("B", b), "B");
    assertThat(bWrite.accepted()).isTrue();

    long evicted = fillUntilEvicted(redis, guard.stateKeys());
    assertThat(evicted)
        .as("the fault fired: Redis evicted keys, the fence among them")
        .isPositive();

    Attempt aLate = write(guard, lease("A", a), "A, late");
    String dataAfter = redis.get(DATA);
    Attempt bAgain = write(guard, lease("B", b), "B, again");
    return new Run("an eviction of the fence", a, b, bAgain, aLate, dataAfter);
  }

  /**
   * A primary and a replica fed through a proxy. The fence and the counter reach the replica (token
   * 1 written); then replication stalls, A takes tokens 2 to 5 and writes with 5 on the primary;
   * the primary crashes and the replica is promoted; B acquires there (token 2 again) and writes;
   * A, reconnected to the new primary, writes with 5.
   */
  private Run failover(Function<StatefulRedisConnection<String, String>, Guard> guardOn)
      throws IOException {
    PrivateRedisServer primary = track(PrivateRedisServer.start("--repl-diskless-sync-delay", "0"));
    TcpProxy replication = track(TcpProxy.start("127.0.0.1", primary.port()));
    PrivateRedisServer replica =
        track(
            PrivateRedisServer.start(
                "--replicaof", "127.0.0.1", Integer.toString(replication.port())));
    StatefulRedisConnection<String, String> toPrimary = connect(primary);
    StatefulRedisConnection<String, String> toReplica = connect(replica);
    await("the replica is in sync")
        .atMost(Duration.ofSeconds(20))
        .until(() -> toReplica.sync().info("replication").contains("master_link_status:up"));
    RedisLockBackend onPrimary = RedisLockBackend.create(toPrimary);
    Guard guardOnPrimary = guardOn.apply(toPrimary);
    guardOnPrimary.establishOnce();

    FencingToken first = takeTokensUpTo(onPrimary, 1, TTL);
    assertThat(write(guardOnPrimary, lease("warm-up", first), "warm-up").accepted()).isTrue();
    assertThat(onPrimary.release(LOCK, "warm-up", first)).isTrue();
    long offset = toPrimary.sync().waitForReplication(1, 5_000);
    assertThat(offset).as("the replica has the fence with token 1").isEqualTo(1);

    replication.freeze();
    FencingToken a = takeTokensUpTo(onPrimary, 4, TTL);
    assertThat(a).isEqualTo(FencingToken.of(5));
    assertThat(write(guardOnPrimary, lease("A", a), "A").accepted()).isTrue();

    toPrimary.setTimeout(Duration.ofMillis(200));
    primary.kill();
    replication.cut();
    toReplica.sync().replicaofNoOne();

    RedisLockBackend onPromoted = RedisLockBackend.create(toReplica);
    Guard guardOnPromoted = guardOn.apply(toReplica);
    FencingToken b = onPromoted.tryAcquire(LOCK, "B", TTL).get();
    assertThat(b)
        .as("the fault fired: the promoted replica lacks A's grants")
        .isEqualTo(FencingToken.of(2));
    Attempt bWrite = write(guardOnPromoted, lease("B", b), "B");
    Attempt aLate = write(guardOnPromoted, lease("A", a), "A, late");
    return new Run(
        "a failover to a lagging replica", a, b, bWrite, aLate, toReplica.sync().get(DATA));
  }

  // --- guards ---

  private static Guard fenced(StatefulRedisConnection<String, String> connection) {
    RedisFence fence = RedisFence.create(connection, FENCE_CONFIG);
    return new Guard() {
      @Override
      public void establishOnce() {
        fence.establish(0);
      }

      @Override
      public Attempt write(Lease lease, String key, String value) {
        try {
          Either<FenceRejection, Void> result = fence.write(lease, key, value);
          return new Attempt(
              result.isRight(), result.isRight() ? "written" : result.getLeft().describe(), null);
        } catch (FenceNotEstablishedException e) {
          return new Attempt(false, e.getMessage(), e.reason());
        }
      }

      @Override
      public List<String> stateKeys() {
        return List.of(FENCE_CONFIG.stateKey());
      }
    };
  }

  private static Guard unguarded(StatefulRedisConnection<String, String> connection) {
    FenceWithoutLossDetection fence = new FenceWithoutLossDetection(connection, FENCE_PREFIX);
    return new Guard() {
      @Override
      public void establishOnce() {}

      @Override
      public Attempt write(Lease lease, String key, String value) {
        boolean written = fence.write(lease, key, value);
        return new Attempt(written, written ? "written" : "refused", null);
      }

      @Override
      public List<String> stateKeys() {
        return List.of(fence.fenceKey(LOCK));
      }
    };
  }

  // --- helpers ---

  private Attempt write(Guard guard, Lease lease, String value) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Attempt attempt = guard.write(lease, DATA, value);
    if (attempt.accepted()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return attempt;
  }

  /** A write through {@code fence} of {@link #DATA}, recorded in the auditor. */
  private Either<FenceRejection, Void> recorded(RedisFence fence, Lease lease, String value) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Either<FenceRejection, Void> result = fence.write(lease, DATA, value);
    if (result.isRight()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return result;
  }

  /**
   * Acquires and releases {@code count - 1} times, then acquires as "A" (or "warm-up" when {@code
   * count} is 1) and holds.
   */
  private static FencingToken takeTokensUpTo(RedisLockBackend backend, int count, Duration ttl) {
    for (int i = 1; i < count; i++) {
      // One owner string per grant, as FencedLock makes them.
      String earlier = "earlier-" + i;
      FencingToken token = backend.tryAcquire(LOCK, earlier, ttl).get();
      assertThat(backend.release(LOCK, earlier, token)).isTrue();
    }
    return backend.tryAcquire(LOCK, count == 1 ? "warm-up" : "A", ttl).get();
  }

  /**
   * Lowers {@code maxmemory} just under what Redis uses and writes filler keys until every key in
   * {@code victims} has been evicted; then lifts the limit again.
   *
   * @return how many keys Redis evicted
   */
  private static long fillUntilEvicted(RedisCommands<String, String> redis, List<String> victims) {
    long used = Long.parseLong(infoField(redis.info("memory"), "used_memory"));
    redis.configSet("maxmemory", Long.toString(used + 256 * 1024));
    String filler = "x".repeat(1024);
    int written = 0;
    while (redis.exists(victims.toArray(String[]::new)) > 0) {
      for (int i = 0; i < 64; i++) {
        redis.set("filler:" + written++, filler);
      }
      assertThat(written)
          .as("filler keys written before the fence was evicted")
          .isLessThan(200_000);
    }
    redis.configSet("maxmemory", "0");
    return Long.parseLong(infoField(redis.info("stats"), "evicted_keys"));
  }

  private static String runId(RedisCommands<String, String> redis) {
    return infoField(redis.info("server"), "run_id");
  }

  private static String infoField(String info, String field) {
    return info.lines()
        .filter(line -> line.startsWith(field + ":"))
        .map(line -> line.substring(field.length() + 1).trim())
        .findFirst()
        .orElseThrow(() -> new AssertionError("INFO has no " + field + ":\n" + info));
  }

  private StatefulRedisConnection<String, String> connect(PrivateRedisServer server) {
    RedisClient client = RedisClient.create(server.uri());
    resources.add(() -> client.shutdown(Duration.ZERO, Duration.ofSeconds(1)));
    return client.connect();
  }

  private static void awaitConnected(StatefulRedisConnection<String, String> connection) {
    await("the connection is back")
        .atMost(Duration.ofSeconds(30))
        .ignoreExceptions()
        .until(() -> "PONG".equals(connection.sync().ping()));
  }

  private <T extends AutoCloseable> T track(T resource) {
    resources.add(resource);
    return resource;
  }

  private static Lease lease(String owner, FencingToken token) {
    LeaseClock clock = LeaseClock.system();
    return new Lease(LOCK, owner, token, Deadline.forHolder(clock, clock.nanoTime(), TTL));
  }
}
