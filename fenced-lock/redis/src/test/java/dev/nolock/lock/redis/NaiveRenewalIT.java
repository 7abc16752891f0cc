package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Renewal must be a compare-and-swap on the holder's own value (as the Redis documentation's <a
 * href="https://redis.io/docs/latest/develop/use/patterns/distributed-locks/">distributed lock
 * pattern</a> extends a lock only "if the key exists and its value is still the random value the
 * client assigned"): a naive renewal (a blind {@code PEXPIRE} on the lock key) from a holder whose
 * lease already expired extends the <em>next</em> holder's lease and tells the stale holder it
 * still holds the lock; the backend's compare-and-extend refuses it and leaves the next holder's
 * lease alone.
 */
@ExtendWith(RedisExtension.class)
class NaiveRenewalIT {

  private static final Duration SHORT = Duration.ofMillis(600);
  private static final Duration B_LEASE = Duration.ofSeconds(5);
  private static final Duration LONG = Duration.ofSeconds(30);

  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisLockBackend backend;

  @BeforeAll
  static void connect(RedisClient client, RedisKeys keys) {
    connection = client.connect();
    redis = connection.sync();
    backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build());
  }

  @AfterAll
  static void disconnect() {
    connection.close();
  }

  /** A expires while paused; B takes over with a 5 s lease; A wakes up and "renews". */
  private FencingToken staleHolderWakesUpAfterTakeover(String name) {
    FencingToken a = backend.tryAcquire(name, "A", SHORT).get();
    String key = backend.config().leaseKey(name);
    await().atMost(Duration.ofSeconds(10)).until(() -> redis.exists(key) == 0);
    backend.tryAcquire(name, "B", B_LEASE).get();
    return a;
  }

  @Test
  void negativeControlABlindPexpireExtendsTheNextHoldersLease() {
    String name = "naive";
    staleHolderWakesUpAfterTakeover(name);
    String key = backend.config().leaseKey(name);

    boolean naiveRenewed = redis.pexpire(key, LONG.toMillis());

    System.out.printf(
        "naive renewal: A's blind PEXPIRE returned %s; B's lease (%s) now has %d ms left, B asked"
            + " for %d%n",
        naiveRenewed, redis.get(key), redis.pttl(key), B_LEASE.toMillis());
    assertThat(naiveRenewed).as("A is told it renewed a lease it lost").isTrue();
    assertThat(redis.get(key)).startsWith("B|");
    assertThat(redis.pttl(key)).as("B's lease was extended by A").isGreaterThan(B_LEASE.toMillis());
  }

  @Test
  void theCompareAndExtendRenewalIsRefusedAndLeavesTheNextHolderAlone() {
    String name = "cas";
    FencingToken a = staleHolderWakesUpAfterTakeover(name);
    String key = backend.config().leaseKey(name);

    boolean renewed = backend.renew(name, "A", a, LONG);

    System.out.printf(
        "CAS renewal: A's renew returned %s; B's lease (%s) has %d ms left%n",
        renewed, redis.get(key), redis.pttl(key));
    assertThat(renewed).isFalse();
    assertThat(redis.get(key)).startsWith("B|");
    assertThat(redis.pttl(key)).isLessThanOrEqualTo(B_LEASE.toMillis());
  }
}
