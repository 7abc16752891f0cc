package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A {@link LeaderElector} on Redis whose lease key another application overwrites with a hash:
 * every renewal and every read of the lease fails with {@code WRONGTYPE}, which the backend reports
 * as an {@link IllegalStateException} (misconfiguration), not as a backend that is down. The leader
 * steps down, the campaign survives the errors, and the candidate leads again once the key is
 * deleted.
 */
@ExtendWith(RedisExtension.class)
class ElectionOnAWrongTypeKeyIT {

  private static final String ELECTION = "wrongtype-election";

  @Test
  void aLeaseKeyOfAnotherTypeStepsTheLeaderDownAndTheCampaignLeadsAgainOnceItIsGone(
      RedisClient client, RedisKeys keys) throws Exception {
    AtomicInteger starts = new AtomicInteger();
    CountDownLatch stopped = new CountDownLatch(1);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (StatefulRedisConnection<String, String> connection = client.connect();
        RedisLockBackend backend =
            RedisLockBackend.create(
                connection, RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build())) {
      RedisCommands<String, String> redis = connection.sync();
      String leaseKey = backend.config().leaseKey(ELECTION);
      try (LeaderElector elector =
          LeaderElector.start(
              backend,
              ElectorConfig.custom(ELECTION)
                  .identity("candidate")
                  .leaseDuration(Duration.ofSeconds(3))
                  .renewDeadline(Duration.ofSeconds(2))
                  .retryPeriod(Duration.ofMillis(200))
                  .haltOnLoss(false)
                  .metrics(registry, ELECTION)
                  .build(),
              new Leadership() {
                @Override
                public void onStartedLeading(HeldLock lease) throws InterruptedException {
                  starts.incrementAndGet();
                  new CountDownLatch(1).await(); // works until its term ends
                }

                @Override
                public void onStoppedLeading() {
                  stopped.countDown();
                }
              })) {
        await("leading").until(elector::isLeader);

        // Another application writes a hash under nolock's key.
        redis.del(leaseKey);
        redis.hset(leaseKey, "field", "not a lease");

        assertThat(stopped.await(10, TimeUnit.SECONDS))
            .as("the leader whose renewals fail with WRONGTYPE steps down")
            .isTrue();
        await("the campaign read the key of another type, or its thread ended")
            .atMost(Duration.ofSeconds(10))
            .until(() -> errors(registry) >= 2 || !campaigning());

        redis.del(leaseKey);

        await("leading again, or the campaign thread ended")
            .atMost(Duration.ofSeconds(10))
            .until(() -> elector.isLeader() || !campaigning());
        assertThat(elector.isLeader())
            .as("after WRONGTYPE the campaign goes on and leads again once the key is gone")
            .isTrue();
        assertThat(starts).hasValue(2);
        assertThat(errors(registry)).isGreaterThanOrEqualTo(2);
      }
    }
  }

  private static double errors(SimpleMeterRegistry registry) {
    Counter counter = registry.find("nolock.leadership.errors").counter();
    return counter == null ? 0 : counter.count();
  }

  private static boolean campaigning() {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.getName().equals("nolock-elector-" + ELECTION) && t.isAlive());
  }
}
