package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import java.io.IOException;
import java.time.Duration;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A Redis failover told second by second, on real processes: a primary, a replica fed through a
 * {@link TcpProxy} (so that replication lag is deterministic: the proxy holds the stream back), a
 * crash of the primary and the promotion of the replica. A lock grant that had not replicated is
 * lost with nobody at fault, and a second holder gets the lock, with the same token. The SQL {@link
 * Fence} on PostgreSQL refuses the stale holder's write. Then what {@code WAIT 1} and {@code
 * min-replicas-to-write} fix, and what they do not: Redis replication is asynchronous, not
 * consensus.
 */
@ExtendWith(PostgresExtension.class)
class RedisFailoverIT {

  private static final Duration TTL = Duration.ofSeconds(10);
  private static final Table<?> RESOURCE = table(name("failover_resource"));
  private static final Field<String> LOCK = field(name("lock_name"), String.class);
  private static final Field<String> VALUE = field(name("value"), String.class);

  private static DSLContext dsl;
  private static final Fence FENCE = Fence.onTable(Fence.DEFAULT_TABLE);

  private final StringBuilder timeline = new StringBuilder();
  private final long start = System.nanoTime();
  private PrivateRedisServer primary;
  private PrivateRedisServer replica;
  private TcpProxy replication;
  private RedisClient primaryClient;
  private RedisClient replicaClient;
  private StatefulRedisConnection<String, String> toPrimary;
  private StatefulRedisConnection<String, String> toReplica;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    dsl = schema.dsl();
    FENCE.createTableIfMissing(dsl);
    dsl.execute("create table failover_resource (lock_name text primary key, value text)");
  }

  private void startPair(String... primaryArgs) throws IOException {
    String[] args = new String[primaryArgs.length + 2];
    args[0] = "--repl-diskless-sync-delay";
    args[1] = "0";
    System.arraycopy(primaryArgs, 0, args, 2, primaryArgs.length);
    primary = PrivateRedisServer.start(args);
    replication = TcpProxy.start("127.0.0.1", primary.port());
    replica =
        PrivateRedisServer.start("--replicaof", "127.0.0.1", Integer.toString(replication.port()));
    primaryClient = RedisClient.create(primary.uri());
    replicaClient = RedisClient.create(replica.uri());
    toPrimary = primaryClient.connect();
    toReplica = replicaClient.connect();
    await("the replica is in sync")
        .atMost(Duration.ofSeconds(20))
        .until(() -> toReplica.sync().info("replication").contains("master_link_status:up"));
  }

  @AfterEach
  void stopPair() throws IOException {
    for (AutoCloseable c : new AutoCloseable[] {toPrimary, toReplica}) {
      if (c != null) {
        try {
          c.close();
        } catch (Exception ignored) {
          // the primary may be dead already
        }
      }
    }
    if (primaryClient != null) {
      primaryClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    }
    if (replicaClient != null) {
      replicaClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    }
    if (replication != null) {
      replication.close();
    }
    if (primary != null) {
      primary.close();
    }
    if (replica != null) {
      replica.close();
    }
  }

  private FencedLock lockOn(StatefulRedisConnection<String, String> connection) {
    return FencedLock.create(
        RedisLockBackend.create(connection),
        LockConfig.custom(LockPurpose.CORRECTNESS).autoRenew(false).build());
  }

  /** A earlier grant, replicated, so that the counter exists on both nodes. */
  private void warmUp(String lock) {
    try (FencedLock warm = lockOn(toPrimary)) {
      warm.tryAcquire(lock, TTL).get().release();
    }
    String counter = RedisLockBackendConfig.ofDefaults().counterKey(lock);
    await().atMost(Duration.ofSeconds(10)).until(() -> "1".equals(toReplica.sync().get(counter)));
  }

  private void failover() {
    // Releasing on a dead primary must fail fast when the test closes its locks.
    toPrimary.setTimeout(Duration.ofMillis(200));
    primary.kill();
    log("the primary crashes (SIGKILL)");
    replication.cut();
    log("the replication stream it held back is gone");
    toReplica.sync().replicaofNoOne();
    log("the replica is promoted: REPLICAOF NO ONE");
  }

  private void runUnreplicatedGrantFailover(String lock, Protection protection) throws Exception {
    startPair();
    warmUp(lock);
    try (FencedLock onPrimary = lockOn(toPrimary);
        FencedLock onPromoted = lockOn(toReplica)) {
      replication.freeze();
      log("replication to the replica stalls (the link lags)");
      HeldLock a = onPrimary.tryAcquire(lock, TTL).get();
      log("A acquires on the primary: token " + a.lease().token().value());
      failover();
      HeldLock b = onPromoted.tryAcquire(lock, TTL).get();
      log(
          "B acquires on the promoted replica: token "
              + b.lease().token().value()
              + "; A still holds by its own clock ("
              + a.deadline().remaining().toMillis()
              + " ms left): two holders");

      assertThat(a.isHeld() && !a.deadline().hasExpired()).as("A believes it holds").isTrue();
      assertThat(b.lease().token()).as("the token is reissued").isEqualTo(a.lease().token());

      FenceAuditor auditor = new FenceAuditor();
      boolean bAccepted = write(b.lease(), "B", protection, auditor);
      log(
          "B writes with token "
              + b.lease().token().value()
              + ": "
              + (bAccepted ? "accepted" : "refused"));
      a.checkPointOfNoReturn(Duration.ofMillis(50));
      boolean aAccepted = write(a.lease(), "A", protection, auditor);
      log(
          "A writes with token "
              + a.lease().token().value()
              + ": "
              + (aAccepted
                  ? "ACCEPTED (lost update)"
                  : "refused by the fence (same token, other owner)"));
      System.out.println("Redis failover without WAIT, " + protection + ":\n" + timeline);

      assertThat(bAccepted).isTrue();
      if (protection == Protection.FENCED) {
        assertThat(aAccepted).isFalse();
        auditor.assertNoStaleWriteAccepted();
      } else {
        assertThat(aAccepted).isTrue();
        assertThatThrownBy(auditor::assertNoStaleWriteAccepted).hasMessageContaining("Lost update");
      }
    }
  }

  @Test
  void aFailoverLosesAnUnreplicatedGrantAndTheFenceRefusesTheStaleHolder() throws Exception {
    runUnreplicatedGrantFailover("failover-fenced", Protection.FENCED);
  }

  @Test
  void negativeControlWithoutTheFenceTheTwoHoldersBothWrite() throws Exception {
    runUnreplicatedGrantFailover("failover-unfenced", Protection.UNFENCED);
  }

  @Test
  void waitOneKeepsAnAcknowledgedGrantThroughTheFailover() throws Exception {
    startPair();
    String lock = "failover-wait";
    warmUp(lock);
    try (FencedLock onPrimary = lockOn(toPrimary);
        FencedLock onPromoted = lockOn(toReplica)) {
      HeldLock a = onPrimary.tryAcquire(lock, TTL).get();
      long acked = toPrimary.sync().waitForReplication(1, 2_000);
      log(
          "A acquires on the primary: token "
              + a.lease().token().value()
              + "; WAIT 1 -> "
              + acked
              + " replica acknowledged");
      failover();
      boolean bGot = onPromoted.tryAcquire(lock, TTL).isDefined();
      log("B tries on the promoted replica: " + (bGot ? "GRANTED" : "refused, A's lease survived"));
      System.out.println("Redis failover with WAIT 1:\n" + timeline);

      assertThat(acked).isEqualTo(1);
      assertThat(bGot).isFalse();
    }
  }

  @Test
  void waitOnlyReportsAnUnacknowledgedGrantItNeitherMakesItDurableNorUndoesIt() throws Exception {
    startPair();
    String lock = "failover-wait-timeout";
    warmUp(lock);
    try (FencedLock onPrimary = lockOn(toPrimary);
        FencedLock onPromoted = lockOn(toReplica)) {
      replication.freeze();
      log("replication stalls");
      HeldLock a = onPrimary.tryAcquire(lock, TTL).get();
      long acked = toPrimary.sync().waitForReplication(1, 500);
      String onPrimaryNow =
          toPrimary.sync().get(RedisLockBackendConfig.ofDefaults().leaseKey(lock));
      log(
          "A acquires: token "
              + a.lease().token().value()
              + "; WAIT 1 (500 ms) -> "
              + acked
              + "; the grant is still on the primary ("
              + onPrimaryNow
              + "): WAIT is no rollback");
      failover();
      boolean bGot = onPromoted.tryAcquire(lock, TTL).isDefined();
      log(
          "B tries on the promoted replica: "
              + (bGot ? "granted" : "refused")
              + ". WAIT told A its grant was unsafe; it did not make it safe: not consensus");
      System.out.println("Redis failover, WAIT timed out:\n" + timeline);

      assertThat(acked).isZero();
      assertThat(onPrimaryNow).startsWith(a.lease().owner() + "|");
      assertThat(bGot).isTrue();
    }
  }

  @Test
  void minReplicasToWriteRefusesGrantsOnceTheReplicaLagsButNotInTheFirstSecond() throws Exception {
    startPair("--min-replicas-to-write", "1", "--min-replicas-max-lag", "2");
    String lock = "failover-min-replicas";
    warmUp(lock);
    try (FencedLock onPrimary = lockOn(toPrimary)) {
      replication.freeze();
      log("replication stalls; the primary keeps accepting writes until the lag passes 2 s");
      boolean grantedInTheWindow = onPrimary.tryAcquire(lock, TTL).isDefined();
      log(
          "A acquires right away: "
              + (grantedInTheWindow ? "granted (inside the lag window)" : "refused"));
      java.util.concurrent.atomic.AtomicInteger probes =
          new java.util.concurrent.atomic.AtomicInteger();
      await("the primary refuses writes")
          .atMost(Duration.ofSeconds(20))
          .until(
              () -> {
                try {
                  // A fresh name each time: a held name is refused by a read, which lag allows.
                  onPrimary.tryAcquire(lock + "-probe-" + probes.incrementAndGet(), TTL);
                  return false;
                } catch (BackendUnavailableException e) {
                  return e.getMessage().contains("NOREPLICAS")
                      || String.valueOf(e.getCause()).contains("NOREPLICAS");
                }
              });
      log("after the lag passed 2 s, a new grant is refused: NOREPLICAS");
      System.out.println("Redis min-replicas-to-write:\n" + timeline);

      assertThat(grantedInTheWindow)
          .as("a grant inside the lag window is accepted and can still be lost")
          .isTrue();
    }
  }

  private boolean write(Lease lease, String value, Protection protection, FenceAuditor auditor) {
    Function<DSLContext, Integer> upsert =
        tx ->
            tx.insertInto(RESOURCE, LOCK, VALUE)
                .values(lease.name(), value)
                .onConflict(LOCK)
                .doUpdate()
                .set(VALUE, value)
                .execute();
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    boolean accepted;
    if (protection == Protection.UNFENCED) {
      dsl.transaction(c -> upsert.apply(c.dsl()));
      accepted = true;
    } else {
      accepted = FENCE.write(dsl, lease, upsert::apply).isRight();
    }
    if (accepted) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return accepted;
  }

  private void log(String event) {
    timeline.append(String.format("  t=%4.1fs  %s%n", (System.nanoTime() - start) / 1e9, event));
  }
}
