package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.CoordinationMetrics;
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
                .metrics(CoordinationMetrics.of(registry, "fence", "accounts"))
                .build());
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
  void aHigherTokenPassesAndAdvancesTheFenceHash() {
    assertThat(write(fenced, lease("A", 1), balance).isRight()).as("no fence yet").isTrue();
    assertThat(write(fenced, lease("B", 2), balance).isRight()).isTrue();

    assertThat(redis.hgetall(fence.config().fenceKey(lock)))
        .containsExactlyInAnyOrderEntriesOf(Map.of("token", "2", "owner", "B"));
    assertThat(redis.get(balance)).isEqualTo("written by B");
    assertThat(redis.pttl(fence.config().fenceKey(lock))).as("the fence has no TTL").isEqualTo(-1L);
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
    String fenceKey = fence.config().fenceKey(lock);

    assertThatThrownBy(() -> fence.write(lease("A", 1), fenceKey, "overwrite"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("fence key prefix");
    assertThat(redis.exists(fenceKey)).isZero();
  }

  @Test
  void theHashTagOfTheLockPutsDataKeysInTheFencesSlot() {
    assertThat(RedisFence.hashTag("orders")).isEqualTo("{orders}");
    assertThat(fence.config().fenceKey("orders")).endsWith(RedisFence.hashTag("orders"));
    assertThat(RedisFence.hashTag("a{b}")).isEqualTo("{a%7Bb%7D}");
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
