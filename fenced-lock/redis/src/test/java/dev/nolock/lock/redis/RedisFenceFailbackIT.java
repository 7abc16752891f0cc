package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Either;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * {@link RedisFence} after a failover to a lagging replica followed by a failback to the very
 * process it was established on: that process rejoins as a replica of the promoted one, fully
 * resyncs its lagging data set (the fence's state loses stale holder A's entry) and is promoted
 * again. Its {@code run_id} is the one the fence was established on, so the {@code run_id} alone
 * cannot show the loss; its replication id ({@code master_replid}) changed, and the fence refuses.
 * The negative control shows what the lagging state lets through when it is trusted anyway.
 *
 * <p>Then what else changes the replication id, on real servers: not a replica leaving and coming
 * back (a primary that never fails over keeps writing), but a primary's first replica and a backlog
 * freed after {@code repl-backlog-ttl} do, without any loss: the fence refuses until an operator
 * resumes, and the entries still fence afterwards.
 *
 * <p>Every test runs private {@code redis-server} processes ({@link PrivateRedisServer}); the
 * shared Redis is never reconfigured.
 */
class RedisFenceFailbackIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final String LOCK = "invoice-42";
  private static final String DATA = "invoice:42:status";
  private static final RedisFenceConfig FENCE_CONFIG =
      RedisFenceConfig.custom().keyPrefix("app:fence:").build();

  private final List<AutoCloseable> resources = new ArrayList<>();

  @AfterEach
  void closeEverything() throws Exception {
    for (int i = resources.size() - 1; i >= 0; i--) {
      resources.get(i).close();
    }
  }

  @Test
  void afterAFailoverAndAFailbackToTheProcessTheFenceWasEstablishedOnTheStaleHoldersWriteIsRefused()
      throws IOException {
    Failback failback = failover();

    String bWrite = attempt(failback.fence(), lease("B", failback.b()), "B");
    String aLate = attempt(failback.fence(), lease("A", failback.a()), "A, late");

    assertThat(bWrite + " / " + aLate + " / data=" + failback.connection().sync().get(DATA))
        .as(
            "after a failover and a failback to the same process, whose fence state lost A's"
                + " entry (token 5): B's write (token 2) and stale A's write must be refused until"
                + " re-established (B's write / A's late write / data)")
        .isEqualTo(
            "not established: REPLICATION_ID_CHANGED / not established: REPLICATION_ID_CHANGED"
                + " / data=warm-up");
  }

  @Test
  void negativeControlTrustingTheResyncedStateAfterTheFailbackLetsBothHoldersWrite()
      throws IOException {
    Failback failback = failover();
    // An operator who wrongly takes the failback for lossless.
    failback.fence().resumeWithSurvivingState();

    String bWrite = attempt(failback.fence(), lease("B", failback.b()), "B");
    String aLate = attempt(failback.fence(), lease("A", failback.a()), "A, late");

    assertThat(bWrite + " / " + aLate + " / data=" + failback.connection().sync().get(DATA))
        .as("the lagging state lacks A's entry: B's token 2 passes, then stale A's token 5")
        .isEqualTo("written / written / data=A, late");
  }

  @Test
  void aPrimaryThatNeverFailsOverKeepsWritingWhileItsReplicaLeavesAndComesBack()
      throws IOException {
    PrivateRedisServer primary = track(PrivateRedisServer.start("--repl-diskless-sync-delay", "0"));
    PrivateRedisServer replica =
        track(PrivateRedisServer.start("--replicaof", "127.0.0.1", port(primary)));
    StatefulRedisConnection<String, String> toPrimary = connect(primary);
    StatefulRedisConnection<String, String> toReplica = connect(replica);
    awaitLinkUp(toReplica);
    RedisFence fence = RedisFence.create(toPrimary, FENCE_CONFIG);
    fence.establish(0);
    String replicationId = infoField(toPrimary, "replication", "master_replid");

    assertThat(attempt(fence, lease("A", FencingToken.of(1)), "A")).isEqualTo("written");
    toReplica.sync().replicaofNoOne();
    await("the primary has no replica")
        .atMost(Duration.ofSeconds(10))
        .until(() -> "0".equals(infoField(toPrimary, "replication", "connected_slaves")));
    assertThat(attempt(fence, lease("B", FencingToken.of(2)), "B")).isEqualTo("written");
    toReplica.sync().replicaof("127.0.0.1", primary.port());
    awaitLinkUp(toReplica);
    assertThat(attempt(fence, lease("C", FencingToken.of(3)), "C")).isEqualTo("written");

    assertThat(infoField(toPrimary, "replication", "master_replid"))
        .as("the primary's replication id stayed the same throughout")
        .isEqualTo(replicationId);
    assertThat(attempt(fence, lease("B", FencingToken.of(2)), "B, late"))
        .as("the fence still refuses a stale token")
        .isEqualTo("refused: " + staleRejection("B", 2, "C", 3));
    assertThat(toPrimary.sync().get(DATA)).isEqualTo("C");
  }

  @Test
  void aPrimarysFirstReplicaChangesItsReplicationIdAndTheFenceRefusesUntilResumed()
      throws IOException {
    PrivateRedisServer primary = track(PrivateRedisServer.start("--repl-diskless-sync-delay", "0"));
    StatefulRedisConnection<String, String> toPrimary = connect(primary);
    RedisFence fence = RedisFence.create(toPrimary, FENCE_CONFIG);
    fence.establish(0);
    assertThat(attempt(fence, lease("A", FencingToken.of(5)), "A")).isEqualTo("written");
    String replicationId = infoField(toPrimary, "replication", "master_replid");

    PrivateRedisServer replica =
        track(PrivateRedisServer.start("--replicaof", "127.0.0.1", port(primary)));
    awaitLinkUp(connect(replica));

    assertThat(infoField(toPrimary, "replication", "master_replid"))
        .as("the fault fired: the first replica made the primary start a backlog and a new id")
        .isNotEqualTo(replicationId);
    assertRefusedUntilResumedThenStillFencing(fence, toPrimary);
  }

  @Test
  void aBacklogFreedAfterReplBacklogTtlChangesTheReplicationIdAndTheFenceRefusesUntilResumed()
      throws IOException {
    PrivateRedisServer primary =
        track(
            PrivateRedisServer.start("--repl-diskless-sync-delay", "0", "--repl-backlog-ttl", "1"));
    PrivateRedisServer replica =
        track(PrivateRedisServer.start("--replicaof", "127.0.0.1", port(primary)));
    StatefulRedisConnection<String, String> toPrimary = connect(primary);
    awaitLinkUp(connect(replica));
    RedisFence fence = RedisFence.create(toPrimary, FENCE_CONFIG);
    fence.establish(0);
    assertThat(attempt(fence, lease("A", FencingToken.of(5)), "A")).isEqualTo("written");
    String replicationId = infoField(toPrimary, "replication", "master_replid");

    replica.kill();
    await("the fault fired: one second without replicas, the primary freed its backlog")
        .atMost(Duration.ofSeconds(20))
        .until(() -> !replicationId.equals(infoField(toPrimary, "replication", "master_replid")));

    assertRefusedUntilResumedThenStillFencing(fence, toPrimary);
  }

  /**
   * A has written with token 5 before the replication id changed: B's write with 6 is refused until
   * the operator resumes; then B writes and A's token 5 is refused by the surviving entry.
   */
  private static void assertRefusedUntilResumedThenStillFencing(
      RedisFence fence, StatefulRedisConnection<String, String> connection) {
    assertThat(attempt(fence, lease("B", FencingToken.of(6)), "B"))
        .isEqualTo("not established: REPLICATION_ID_CHANGED");
    assertThat(connection.sync().get(DATA)).isEqualTo("A");

    fence.resumeWithSurvivingState();

    assertThat(attempt(fence, lease("B", FencingToken.of(6)), "B")).isEqualTo("written");
    assertThat(attempt(fence, lease("A", FencingToken.of(5)), "A, late"))
        .isEqualTo("refused: " + staleRejection("A", 5, "B", 6));
    assertThat(connection.sync().get(DATA)).isEqualTo("B");
  }

  private static String staleRejection(
      String owner, long token, String currentOwner, long currentToken) {
    return new FenceRejection(
            LOCK, FencingToken.of(token), owner, FencingToken.of(currentToken), currentOwner)
        .describe();
  }

  private static String port(PrivateRedisServer server) {
    return Integer.toString(server.port());
  }

  private static void awaitLinkUp(StatefulRedisConnection<String, String> replica) {
    await("the replica is in sync")
        .atMost(Duration.ofSeconds(20))
        .until(
            () -> {
              String info = replica.sync().info("replication");
              return info.contains("master_link_status:up")
                  && info.contains("master_sync_in_progress:0");
            });
  }

  /**
   * What the failback left on the old primary, through which B (token 2, from the promoted
   * replica's counter) and stale A (token 5) then write.
   */
  private record Failback(
      StatefulRedisConnection<String, String> connection,
      RedisFence fence,
      FencingToken a,
      FencingToken b) {}

  /**
   * A primary established with the fence and a replica fed through a proxy; token 1 is written and
   * replicated. Replication stalls; A takes tokens 2 to 5 and writes with 5 on the primary only.
   * The replica is promoted (the primary is cut off, not killed); B acquires there (token 2 again)
   * and is refused, the promoted replica not being the process the fence was established on. Before
   * an operator re-establishes, the old primary rejoins as a replica of the promoted one, resyncs
   * its data set, and is promoted again.
   */
  private Failback failover() throws IOException {
    PrivateRedisServer primary = track(PrivateRedisServer.start("--repl-diskless-sync-delay", "0"));
    TcpProxy replication = track(TcpProxy.start("127.0.0.1", primary.port()));
    PrivateRedisServer replica =
        track(
            PrivateRedisServer.start(
                "--repl-diskless-sync-delay",
                "0",
                "--replicaof",
                "127.0.0.1",
                Integer.toString(replication.port())));
    StatefulRedisConnection<String, String> toPrimary = connect(primary);
    StatefulRedisConnection<String, String> toReplica = connect(replica);
    await("the replica is in sync")
        .atMost(Duration.ofSeconds(20))
        .until(() -> toReplica.sync().info("replication").contains("master_link_status:up"));
    RedisLockBackend onPrimary = RedisLockBackend.create(toPrimary);
    RedisFence fenceOnPrimary = RedisFence.create(toPrimary, FENCE_CONFIG);
    fenceOnPrimary.establish(0);

    FencingToken warmUp = onPrimary.tryAcquire(LOCK, "warm-up", TTL).get();
    assertThat(fenceOnPrimary.write(lease("warm-up", warmUp), DATA, "warm-up").isRight()).isTrue();
    assertThat(onPrimary.release(LOCK, "warm-up", warmUp)).isTrue();
    assertThat(toPrimary.sync().waitForReplication(1, 5_000))
        .as("the replica has the fence with token 1")
        .isEqualTo(1);

    replication.freeze();
    FencingToken a = null;
    for (int i = 2; i <= 5; i++) {
      // One owner string per grant, as FencedLock makes them.
      String owner = i == 5 ? "A" : "earlier-" + i;
      FencingToken token = onPrimary.tryAcquire(LOCK, owner, TTL).get();
      if (i < 5) {
        assertThat(onPrimary.release(LOCK, owner, token)).isTrue();
      } else {
        a = token;
      }
    }
    assertThat(a).isEqualTo(FencingToken.of(5));
    assertThat(fenceOnPrimary.write(lease("A", a), DATA, "A").isRight()).isTrue();
    String primaryRunId = infoField(toPrimary, "server", "run_id");

    replication.cut();
    toReplica.sync().replicaofNoOne();
    FencingToken b = RedisLockBackend.create(toReplica).tryAcquire(LOCK, "B", TTL).get();
    assertThat(b).as("the promoted replica lacks A's grants").isEqualTo(FencingToken.of(2));
    assertThat(attempt(RedisFence.create(toReplica, FENCE_CONFIG), lease("B", b), "B"))
        .as("on the promoted replica, another process, the loss is detected")
        .isEqualTo("not established: ESTABLISHED_ON_ANOTHER_SERVER");

    toPrimary.sync().replicaof("127.0.0.1", replica.port());
    String counterKey = RedisLockBackendConfig.ofDefaults().counterKey(LOCK);
    await("the old primary resynced from the promoted replica")
        .atMost(Duration.ofSeconds(20))
        .until(
            () -> {
              String info = toPrimary.sync().info("replication");
              return info.contains("master_link_status:up")
                  && info.contains("master_sync_in_progress:0")
                  && "2".equals(toPrimary.sync().get(counterKey));
            });
    toPrimary.sync().replicaofNoOne();
    assertThat(infoField(toPrimary, "server", "run_id"))
        .as("the same server process")
        .isEqualTo(primaryRunId);
    assertThat(toPrimary.sync().hget(FENCE_CONFIG.stateKey(), "lock:" + LOCK))
        .as("the fault fired: the fence state is the lagging copy, without A's entry")
        .isEqualTo("1|warm-up");
    return new Failback(toPrimary, fenceOnPrimary, a, b);
  }

  private static String attempt(RedisFence fence, Lease lease, String value) {
    try {
      Either<FenceRejection, Void> result = fence.write(lease, DATA, value);
      return result.isRight() ? "written" : "refused: " + result.getLeft().describe();
    } catch (FenceNotEstablishedException e) {
      return "not established: " + e.reason();
    }
  }

  private static String infoField(
      StatefulRedisConnection<String, String> connection, String section, String field) {
    String info = connection.sync().info(section);
    return info.lines()
        .filter(line -> line.startsWith(field + ":"))
        .map(line -> line.substring(field.length() + 1).trim())
        .findFirst()
        .orElseThrow(() -> new AssertionError("INFO " + section + " has no " + field));
  }

  private StatefulRedisConnection<String, String> connect(PrivateRedisServer server) {
    RedisClient client = RedisClient.create(server.uri());
    resources.add(() -> client.shutdown(Duration.ZERO, Duration.ofSeconds(1)));
    return client.connect();
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
