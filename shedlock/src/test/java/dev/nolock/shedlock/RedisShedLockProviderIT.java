package dev.nolock.shedlock;

import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.lock.redis.RedisLockBackendConfig;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/** The ShedLock provider contract on the real Redis backend ($NOLOCK_REDIS_URI). */
@ExtendWith(RedisExtension.class)
class RedisShedLockProviderIT extends ShedLockProviderContract {

  private static StatefulRedisConnection<String, String> connection;
  private static RedisLockBackend backend;

  @BeforeAll
  static void connect(RedisClient client, RedisKeys keys) {
    connection = client.connect();
    backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(keys.key("shedlock:")).build());
  }

  @AfterAll
  static void disconnect() {
    backend.close();
    connection.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }
}
