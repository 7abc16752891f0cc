package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * The Redis backend on the application's Spring Data Redis: a connection of the lock's own from the
 * factory's native client, and leases released when the context closes, before the factory shuts
 * its client down.
 */
@ExtendWith(RedisExtension.class)
class RedisLockAutoConfigurationIT {

  private final RedisURI uri;
  private final RedisKeys keys;
  private final StatefulRedisConnection<String, String> observer;

  RedisLockAutoConfigurationIT(RedisClient client, RedisURI uri, RedisKeys keys) {
    this.uri = uri;
    this.keys = keys;
    this.observer = client.connect();
  }

  @AfterEach
  void close() {
    observer.close();
  }

  private ApplicationContextRunner runner() {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataRedisAutoConfiguration.class, NolockLockAutoConfiguration.class))
        .withPropertyValues(
            "spring.data.redis.url=redis://" + uri.getHost() + ":" + uri.getPort(),
            "spring.data.redis.timeout=2s",
            "nolock.lock.backend=redis",
            "nolock.lock.purpose=correctness",
            "nolock.lock.redis.key-prefix=" + keys.prefix());
  }

  @Test
  void aLeaseHeldWhenTheContextClosesIsReleasedNotLeftToItsTtl() {
    String[] leaseKey = new String[1];
    runner()
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).getBean(LockBackend.class).isInstanceOf(RedisLockBackend.class);
              HeldLock held =
                  context.getBean(FencedLock.class).tryAcquire("job", Duration.ofMinutes(5)).get();
              leaseKey[0] = context.getBean(RedisLockBackend.class).config().leaseKey(held.name());
              assertThat(observer.sync().get(leaseKey[0])).contains(held.owner());
            });
    assertThat(observer.sync().exists(leaseKey[0])).as("released at shutdown").isZero();
  }

  /**
   * Negative control: a lock closed only after Spring Data Redis's factory stopped (as bean
   * destruction alone would do) cannot release, and its lease stays until the TTL.
   */
  @Test
  void aLockClosedAfterTheFactoryStoppedLeavesItsLease() {
    runner()
        .run(
            context -> {
              HeldLock held =
                  context
                      .getBean(FencedLock.class)
                      .tryAcquire("job-2", Duration.ofMinutes(5))
                      .get();
              String leaseKey =
                  context.getBean(RedisLockBackend.class).config().leaseKey(held.name());
              context.getBean(LettuceConnectionFactory.class).stop();
              context.getBean(FencedLock.class).close();
              assertThat(observer.sync().exists(leaseKey)).isEqualTo(1);
              observer.sync().del(leaseKey);
            });
  }
}
