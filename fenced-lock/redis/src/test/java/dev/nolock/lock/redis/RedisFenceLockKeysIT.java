package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link RedisFence} refuses a data key in the lock backend's key space: overwriting a lock's token
 * counter through the fence would make {@link RedisLockBackend} hand out tokens it already issued.
 * The negative control writes the same value with a plain {@code SET} and sees a token reissued.
 */
@ExtendWith(RedisExtension.class)
class RedisFenceLockKeysIT {

  private static final Duration TTL = Duration.ofSeconds(30);

  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisKeys keys;
  private static RedisFence fence;

  /** Under the default lock prefix, outside the class's own key prefix: deleted after each test. */
  private String lock;

  @BeforeAll
  static void connect(RedisClient client, RedisKeys classKeys) {
    keys = classKeys;
    connection = client.connect();
    redis = connection.sync();
    fence =
        RedisFence.create(
            connection, RedisFenceConfig.custom().keyPrefix(keys.key("fence:")).build());
    fence.establish(0);
  }

  @BeforeEach
  void uniqueLock() {
    lock = "orders-" + UUID.randomUUID();
  }

  @AfterEach
  void deleteDefaultPrefixKeys() {
    RedisLockBackendConfig defaults = RedisLockBackendConfig.ofDefaults();
    redis.del(defaults.leaseKey(lock), defaults.counterKey(lock), lookalike());
  }

  @AfterAll
  static void disconnect() {
    connection.close();
  }

  @Test
  void theTokenCounterUnderTheDefaultLockPrefixIsRefusedAndKeepsCounting() {
    RedisLockBackend backend = RedisLockBackend.create(connection);
    String counter = backend.config().counterKey(lock);
    Lease first = acquire(backend, "A");
    assertThat(first.token()).isEqualTo(FencingToken.of(1));

    assertThatThrownBy(() -> fence.write(first, counter, "0"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"" + counter + "\"")
        .hasMessageContaining("lock backend")
        .hasMessageContaining("nolock:lock:{");
    assertThat(redis.get(counter)).isEqualTo("1");

    assertThat(backend.release(lock, "A", first.token())).isTrue();
    assertThat(acquire(backend, "B").token()).isEqualTo(FencingToken.of(2));
  }

  @Test
  void everyKeyOfALockIsRefusedAndAWriteAllWithOneOfThemWritesNothing() {
    RedisLockBackendConfig defaults = RedisLockBackendConfig.ofDefaults();
    RedisLockBackend backend = RedisLockBackend.create(connection);
    Lease held = acquire(backend, "A");
    String data = keys.key("data:" + lock);
    Map<String, String> values = new LinkedHashMap<>();
    values.put(data, "charged");
    values.put(defaults.releaseMarkerKey(lock, held.token()), "forged");

    for (String key :
        new String[] {
          defaults.leaseKey(lock),
          defaults.counterKey(lock),
          defaults.releaseMarkerKey(lock, held.token()),
          defaults.counterKey("another lock")
        }) {
      assertThatThrownBy(() -> fence.write(held, key, "x"))
          .as(key)
          .isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> fence.writeAll(held, values))
        .isInstanceOf(IllegalArgumentException.class);

    assertThat(redis.exists(data)).isZero();
    assertThat(redis.get(defaults.leaseKey(lock))).isEqualTo("A|" + held.token().value());
  }

  @Test
  void theTokenCounterUnderAConfiguredLockPrefixIsRefusedByAFenceThatKnowsIt() {
    String lockPrefix = keys.key("lock:");
    RedisLockBackend backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(lockPrefix).build());
    RedisFence knowing =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("fence:"))
                .lockKeyPrefix(lockPrefix)
                .build());
    String counter = backend.config().counterKey(lock);
    Lease first = acquire(backend, "A");

    assertThatThrownBy(() -> knowing.write(first, counter, "0"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"" + lockPrefix + "{\"");
    assertThat(redis.get(counter)).isEqualTo("1");
    assertThat(backend.release(lock, "A", first.token())).isTrue();
    assertThat(acquire(backend, "B").token()).isEqualTo(FencingToken.of(2));
  }

  @Test
  void negativeControlAFenceNotToldTheConfiguredLockPrefixLetsTheCounterBeReset() {
    String lockPrefix = keys.key("unnamed-lock:");
    RedisLockBackend backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(lockPrefix).build());
    Lease first = acquire(backend, "A");
    assertThat(backend.release(lock, "A", first.token())).isTrue();

    assertThat(fence.write(first, backend.config().counterKey(lock), "0").isRight()).isTrue();

    assertThat(acquire(backend, "B").token()).isEqualTo(first.token());
  }

  @Test
  void aDataKeyOutsideTheLockKeySpaceIsWritten() {
    RedisLockBackend backend = RedisLockBackend.create(connection);
    Lease held = acquire(backend, "A");
    String data = keys.key("data:" + lock);
    // Starts like the lock prefix but is no key the backend can make: lock keys all have a '{'.
    String lookalike = lookalike();

    assertThat(fence.write(held, data, "charged").isRight()).isTrue();
    assertThat(fence.write(held, lookalike, "charged").isRight()).isTrue();

    assertThat(redis.mget(data, lookalike)).extracting(kv -> kv.getValue()).containsOnly("charged");
  }

  @Test
  void negativeControlWithAPlainSetTheResetCounterReissuesAToken() {
    RedisLockBackend backend = RedisLockBackend.create(connection);
    Lease first = acquire(backend, "A");
    assertThat(backend.release(lock, "A", first.token())).isTrue();

    redis.set(backend.config().counterKey(lock), "0");

    assertThat(acquire(backend, "B").token())
        .as("B gets the token A had: the fence can no longer tell them apart")
        .isEqualTo(first.token());
  }

  private String lookalike() {
    return RedisLockBackendConfig.DEFAULT_KEY_PREFIX + lock + ":status";
  }

  private Lease acquire(RedisLockBackend backend, String owner) {
    FencingToken token = backend.tryAcquire(lock, owner, TTL).get();
    return RedisFenceIT.lease(lock, owner, token.value());
  }
}
