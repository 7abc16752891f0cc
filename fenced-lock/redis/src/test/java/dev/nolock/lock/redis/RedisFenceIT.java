package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link RedisFence} against the real Redis: a stale token writes nothing, and the same scenarios
 * with a plain {@code SET} (no fence) are caught by the same assertions (the negative controls).
 */
@ExtendWith(RedisExtension.class)
class RedisFenceIT {

  private static final AtomicInteger LOCKS = new AtomicInteger();

  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisKeys keys;
  private static SimpleMeterRegistry registry;
  private static RedisFence fence;

  private final FenceAuditor auditor = new FenceAuditor();
  private String lock;
  private String balance;
  private String history;

  /** A protected write: the fence's, or the plain SET of the negative controls. */
  private interface Writer {
    Either<FenceRejection, Void> write(Lease lease, String key, String value);
  }

  private final Writer fenced = (lease, key, value) -> fence.write(lease, key, value);
  private final Writer unfenced =
      (lease, key, value) -> {
        redis.set(key, value);
        return Either.right(null);
      };

  @BeforeAll
  static void connect(RedisClient client, RedisKeys classKeys) {
    keys = classKeys;
    connection = client.connect();
    redis = connection.sync();
    registry = new SimpleMeterRegistry();
    fence =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("fence:"))
                .metrics(registry, "accounts")
                .build());
    fence.establish(0);
  }

  @AfterAll
  static void disconnect() {
    connection.close();
  }

  @BeforeEach
  void freshLock() {
    lock = "accounts-" + LOCKS.incrementAndGet();
    balance = keys.key("data:" + lock + ":balance");
    history = keys.key("data:" + lock + ":history");
  }

  @Test
  void aStaleTokenIsRefusedAndTheKeyKeepsTheNewerHoldersValue() {
    runStaleHolderScenario(fenced);

    assertThat(auditor.attempts("A")).as("A's late write was attempted").isEqualTo(1);
    assertThat(auditor.refusals("A")).isEqualTo(1);
    auditor.assertNoStaleWriteAccepted();
    assertThat(redis.get(balance)).isEqualTo("written by B");
  }

  @Test
  void negativeControlWithoutTheFenceTheStaleWriteIsCaught() {
    runStaleHolderScenario(unfenced);

    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
    assertThat(redis.get(balance)).isEqualTo("written by A");
  }

  @Test
  void aStaleTokenCannotWriteAKeyTheNewHolderHasNotTouchedYet() {
    write(fenced, lease("B", 34), balance);

    Either<FenceRejection, Void> late = write(fenced, lease("A", 33), history);

    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThat(late.isLeft()).isTrue();
    assertThat(redis.exists(history)).as("the fence guards the lock, not each key").isZero();
  }

  @Test
  void theRejectionNamesTheTokenAndOwnerThatWonAndIsCounted() {
    double before = rejections();
    write(fenced, lease("B", 34), balance);

    Either<FenceRejection, Void> late = write(fenced, lease("A", 33), balance);

    assertThat(late.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(33), "A", FencingToken.of(34), "B"));
    assertThat(rejections() - before).isEqualTo(1);
  }

  @Test
  void anEqualTokenFromAnotherOwnerIsRefusedButTheSameOwnerMayWriteAgain() {
    // A Redis restart without persistence reissues token 7 to B while A still writes with it.
    assertThat(write(fenced, lease("A", 7), balance).isRight()).isTrue();
    assertThat(write(fenced, lease("A", 7), balance).isRight())
        .as("same owner, same token")
        .isTrue();

    Either<FenceRejection, Void> reissued = write(fenced, lease("B", 7), balance);

    assertThat(auditor.attempts("B")).isEqualTo(1);
    assertThat(reissued.getLeft())
        .isEqualTo(new FenceRejection(lock, FencingToken.of(7), "B", FencingToken.of(7), "A"));
    assertThat(redis.get(balance)).isEqualTo("written by A");
    auditor.assertNoStaleWriteAccepted();
  }

  @Test
  void negativeControlWithoutTheFenceAnEqualTokenFromAnotherOwnerIsCaught() {
    write(unfenced, lease("A", 7), balance);
    write(unfenced, lease("B", 7), balance);

    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update");
  }

  @Test
  void aHigherTokenPassesAndAdvancesTheLocksEntry() {
    assertThat(write(fenced, lease("A", 1), balance).isRight()).as("no entry yet").isTrue();
    assertThat(write(fenced, lease("B", 2), balance).isRight()).isTrue();

    String stateKey = fence.config().stateKey();
    assertThat(redis.hget(stateKey, "lock:" + lock)).isEqualTo("2|B");
    assertThat(redis.get(balance)).isEqualTo("written by B");
    assertThat(redis.pttl(stateKey)).as("the fence has no TTL").isEqualTo(-1L);
  }

  @Test
  void anOwnerWithABarIsReadBackWhole() {
    assertThat(write(fenced, lease("host|4242", 3), balance).isRight()).isTrue();

    Either<FenceRejection, Void> other = write(fenced, lease("host|4243", 3), balance);

    assertThat(other.getLeft().currentOwner()).isEqualTo("host|4242");
    assertThat(write(fenced, lease("host|4242", 3), balance).isRight()).isTrue();
  }

  @Test
  void aFenceThatWasNeverEstablishedRefusesEveryWriteAndWritesNothing() {
    RedisFence unestablished =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("unestablished-fence:"))
                .metrics(registry, "accounts")
                .build());
    double before = rejections();
    auditor.attempted(lock, FencingToken.of(1), "A");

    assertThatThrownBy(() -> unestablished.write(lease("A", 1), balance, "written by A"))
        .isInstanceOfSatisfying(
            FenceNotEstablishedException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(FenceNotEstablishedException.Reason.NO_STATE);
              assertThat(e.lockName()).isEqualTo(lock);
              assertThat(e.establishedOn()).isEmpty();
            })
        .hasMessageContaining("was never established, or Redis lost it")
        .hasMessageContaining("RedisFence.establish(floor)");
    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThat(redis.exists(balance)).isZero();
    assertThat(rejections() - before).as("counted as a refused write").isEqualTo(1);
  }

  @Test
  void aTokenAtOrBelowTheFloorIsRefusedNamingTheFloor() {
    RedisFence floored =
        RedisFence.create(
            connection, RedisFenceConfig.custom().keyPrefix(keys.key("floored-fence:")).build());
    floored.establish(40);

    Either<FenceRejection, Void> atTheFloor = floored.write(lease("A", 40), balance, "A");

    assertThat(atTheFloor.getLeft())
        .isEqualTo(
            new FenceRejection(
                lock, FencingToken.of(40), "A", FencingToken.of(40), RedisFence.FLOOR_OWNER));
    assertThat(floored.write(lease("A", 41), balance, "A").isRight()).isTrue();
    assertThat(redis.get(balance)).isEqualTo("A");
  }

  @Test
  void aNegativeOrMaximalFloorIsRefusedAtTheApiEdge() {
    assertThatThrownBy(() -> fence.establish(-1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pass 0 for a fence that never had state");
    assertThatThrownBy(() -> fence.establish(Long.MAX_VALUE))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aConnectionWithoutACommandTimeoutIsRefused(RedisClient client) {
    try (StatefulRedisConnection<String, String> unbounded = client.connect()) {
      unbounded.setTimeout(Duration.ZERO);

      assertThatThrownBy(() -> RedisFence.create(unbounded))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("RedisURI.setTimeout");
    }
  }

  @Test
  void onlyTheLatestWriteIdsAreRememberedAndALowerNumberIsReachedTwoAtATime() {
    RedisFence remembersThree =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("memory-fence:"))
                .rememberedWrites(3)
                .build());
    remembersThree.establish(0);
    String stateKey = remembersThree.config().stateKey();
    for (int i = 1; i <= 5; i++) {
      assertThat(remembersThree.write(lease("A", 1), balance, "write " + i).isRight()).isTrue();
    }

    assertThat(rememberedWriteSequences(stateKey))
        .as("the ids of writes 3 to 5, each under its sequence number")
        .containsExactly(3L, 4L, 5L);
    assertThat(redis.hget(stateKey, "applied-oldest")).isEqualTo("3");

    RedisFence remembersOne =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("memory-fence:"))
                .rememberedWrites(1)
                .build());
    assertThat(remembersOne.write(lease("A", 1), balance, "write 6").isRight()).isTrue();
    assertThat(rememberedWriteSequences(stateKey))
        .as("write 6 forgot two: 3 and 4")
        .containsExactly(5L, 6L);
    assertThat(remembersOne.write(lease("A", 1), balance, "write 7").isRight()).isTrue();
    assertThat(rememberedWriteSequences(stateKey)).containsExactly(7L);
    assertThat(redis.get(balance)).isEqualTo("write 7");
  }

  @Test
  void theFencedWriteReadsNoClock() {
    // Retention is counted in writes: a clock step on the Redis host cannot forget an id early.
    assertThat(Scripts.FENCED_WRITE.source()).doesNotContainIgnoringCase("'TIME'");
  }

  @Test
  void tokensAreComparedAsNumbersNotAsText() {
    assertThat(write(fenced, lease("A", 9), balance).isRight()).isTrue();
    assertThat(write(fenced, lease("B", 10), balance).isRight()).as("10 > 9").isTrue();

    assertThat(write(fenced, lease("A", 9), balance).isLeft()).as("9 < 10").isTrue();
    assertThat(redis.get(balance)).isEqualTo("written by B");
  }

  @Test
  void writeAllWritesEveryKeyOrNone() {
    Lease b = lease("B", 5);
    assertThat(fence.writeAll(b, Map.of(balance, "50", history, "b")).isRight()).isTrue();

    Either<FenceRejection, Void> stale =
        fence.writeAll(lease("A", 4), Map.of(balance, "0", history, "a"));

    assertThat(stale.isLeft()).isTrue();
    assertThat(redis.mget(balance, history))
        .extracting(kv -> kv.getValue())
        .containsExactly("50", "b");
  }

  @Test
  void aDataKeyUnderTheFencePrefixIsRefused() {
    String stateKey = fence.config().stateKey();
    Map<String, String> before = redis.hgetall(stateKey);

    assertThatThrownBy(() -> fence.write(lease("A", 1), stateKey, "overwrite"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("fence key prefix");
    assertThat(redis.hgetall(stateKey)).isEqualTo(before);
  }

  /**
   * B (token 34) takes over and writes; A (token 33), paused past its lease, wakes and writes the
   * same key.
   */
  private void runStaleHolderScenario(Writer writer) {
    write(writer, lease("B", 34), balance);
    write(writer, lease("A", 33), balance);
  }

  private Either<FenceRejection, Void> write(Writer writer, Lease lease, String key) {
    auditor.attempted(lease.name(), lease.token(), lease.owner());
    Either<FenceRejection, Void> result = writer.write(lease, key, "written by " + lease.owner());
    if (result.isRight()) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
    return result;
  }

  /**
   * The sequence numbers of the fence's remembered write ids, in order; each id and its number
   * point at each other.
   */
  private static List<Long> rememberedWriteSequences(String stateKey) {
    Map<String, String> state = redis.hgetall(stateKey);
    List<Long> sequences = new ArrayList<>();
    state.forEach(
        (field, value) -> {
          if (field.startsWith("applied-id:")) {
            assertThat(state.get("applied-at:" + value))
                .as("the id remembered under %s", value)
                .isEqualTo(field.substring("applied-id:".length()));
            sequences.add(Long.parseLong(value));
          }
        });
    assertThat(state.keySet().stream().filter(field -> field.startsWith("applied-at:")))
        .as("one applied-at per remembered id")
        .hasSize(sequences.size());
    Collections.sort(sequences);
    return sequences;
  }

  private double rejections() {
    return registry.get("nolock.fence.rejections").counter().count();
  }

  private Lease lease(String owner, long token) {
    return lease(lock, owner, token);
  }

  /** A lease on {@code lock} as a lock backend would hand it out; the deadline plays no part. */
  static Lease lease(String lock, String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
