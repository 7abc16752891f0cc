package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseScenario;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The pause test on the Redis backend: holders in child JVMs, frozen with SIGSTOP between their
 * point-of-no-return check and their write until their leases expire, resumed after a new holder
 * has written a Redis key through the {@link RedisFence}.
 */
@ExtendWith(RedisExtension.class)
class RedisPauseIT {

  private static final String URI_PROPERTY = "nolock.pause.redisUri";
  private static final String PREFIX_PROPERTY = "nolock.pause.prefix";

  private static String uri;
  private static String prefix;

  @BeforeAll
  static void endpoints(RedisURI redisUri, RedisKeys keys) {
    uri = redisUri.toURI().toString();
    prefix = keys.prefix();
  }

  /** A correctness holder on the Redis backend that writes one Redis key per lock. */
  public static final class Holder implements PausableHolder {
    private final RedisClient client;
    private final StatefulRedisConnection<String, String> connection;
    private final FencedLock locks;
    private final RedisFence fence;
    private final String prefix;

    /** The child JVM's constructor: settings come from system properties. */
    public Holder() {
      this(System.getProperty(URI_PROPERTY), System.getProperty(PREFIX_PROPERTY));
    }

    Holder(String uri, String prefix) {
      this.prefix = prefix;
      this.client = RedisClient.create(uri);
      this.connection = client.connect();
      this.locks =
          FencedLock.create(
              RedisLockBackend.create(
                  connection, RedisLockBackendConfig.custom().keyPrefix(prefix + "lock:").build()),
              LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
      this.fence =
          RedisFence.create(
              connection, RedisFenceConfig.custom().keyPrefix(prefix + "fence:").build());
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      HeldLock held =
          locks
              .acquire(lockName, ttl, maxWait)
              .getOrElseThrow(n -> new IllegalStateException("not acquired: " + n));
      held.checkPointOfNoReturn(Duration.ofMillis(50));
      return held.lease();
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
      String key = dataKey(lease.name());
      if (protection == Protection.UNFENCED) {
        connection.sync().set(key, value);
        return true;
      }
      return fence.write(lease, key, value).isRight();
    }

    @Override
    public Optional<String> read(String lockName) {
      return Optional.ofNullable(connection.sync().get(dataKey(lockName)));
    }

    private String dataKey(String lockName) {
      return prefix + "data:" + lockName;
    }

    @Override
    public void close() {
      locks.close();
      connection.close();
      client.shutdown();
    }
  }

  private PauseScenario scenario() {
    return PauseScenario.builder(Holder.class)
        .pausedHolders(2)
        .childSystemProperty(URI_PROPERTY, uri)
        .childSystemProperty(PREFIX_PROPERTY, prefix)
        .build();
  }

  @Test
  void staleWritesOfHoldersFrozenBetweenCheckAndWriteAreAllRefused() throws Exception {
    int attempted = 0;
    int refused = 0;
    try (Holder newHolder = new Holder(uri, prefix)) {
      for (int run = 1; run <= 2; run++) {
        PauseScenario.Result result =
            scenario().run(newHolder, "pause-fenced-" + run, Protection.FENCED);
        System.out.println("Redis lock, fenced, run " + run + ":\n" + result.timeline());

        assertThat(result.newHolderAccepted()).isTrue();
        assertThat(result.pausedWrites()).hasSize(2);
        for (PauseScenario.PausedWrite stale : result.pausedWrites()) {
          assertThat(stale.attempted()).as("the stale write went out").isTrue();
          assertThat(stale.accepted()).as("and was refused").isFalse();
          assertThat(result.newHolderLease().token().isNewerThan(stale.token())).isTrue();
          attempted++;
          refused += stale.accepted() ? 0 : 1;
        }
        result.auditor().assertNoStaleWriteAccepted();
        assertThat(result.finalValue()).contains("new-holder");
      }
    }
    System.out.printf(
        "Redis lock, fenced: %d stale writes attempted, %d refused%n", attempted, refused);
    assertThat(attempted).isEqualTo(4);
    assertThat(refused).isEqualTo(4);
  }

  @Test
  void negativeControlWithoutTheFenceTheAuditorReportsTheLostUpdate() throws Exception {
    try (Holder newHolder = new Holder(uri, prefix)) {
      PauseScenario.Result result =
          scenario().run(newHolder, "pause-unfenced", Protection.UNFENCED);
      System.out.println("Redis lock, unfenced (negative control):\n" + result.timeline());

      assertThat(result.pausedWrites()).allMatch(PauseScenario.PausedWrite::accepted);
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Lost update");
      assertThat(result.finalValue()).isNotEqualTo(Optional.of("new-holder"));
      System.out.printf(
          "Redis lock, unfenced: %d stale writes accepted (caught by the auditor)%n",
          result.auditor().staleAcceptances().size());
    }
  }
}
