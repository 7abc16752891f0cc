package dev.nolock.lock.redis;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseContract;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The pause test on the Redis backend: holders in child JVMs, frozen with SIGSTOP between their
 * point-of-no-return check and their write until their leases expire, resumed after a new holder
 * has written a Redis key through the {@link RedisFence}.
 */
@ExtendWith(RedisExtension.class)
class RedisPauseIT extends PauseContract {

  private static final String URI_PROPERTY = "nolock.pause.redisUri";
  private static final String PREFIX_PROPERTY = "nolock.pause.prefix";

  private static String uri;
  private static String prefix;

  @BeforeAll
  static void endpoints(RedisClient client, RedisKeys keys) {
    // The URI the extension read, password included: RedisURI.toURI() writes a placeholder in
    // place of the credentials.
    uri = Endpoints.fromEnvironment().redisUri();
    prefix = keys.prefix();
    // The operator's step, once before the holders use the fence.
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      RedisFence.create(connection, fenceConfig(prefix)).establish(0);
    }
  }

  private static RedisFenceConfig fenceConfig(String prefix) {
    return RedisFenceConfig.custom()
        .keyPrefix(prefix + "fence:")
        .lockKeyPrefix(prefix + "lock:")
        .build();
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
      this.fence = RedisFence.create(connection, fenceConfig(prefix));
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
    public Option<String> read(String lockName) {
      return Option.of(connection.sync().get(dataKey(lockName)));
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

  @Override
  protected Class<? extends PausableHolder> holderType() {
    return Holder.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URI_PROPERTY, uri, PREFIX_PROPERTY, prefix);
  }

  @Override
  protected PausableHolder newHolder() {
    return new Holder(uri, prefix);
  }

  @Override
  protected String label() {
    return "Redis lock";
  }
}
