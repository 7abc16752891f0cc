package example;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.redis.RedisFence;
import dev.nolock.lock.redis.RedisFenceConfig;
import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.lock.redis.RedisLockBackendConfig;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.Lease;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Two instances charge one invoice under the fenced lock; the first one's late write is refused.
 */
public final class Main {

  public static void main(String[] args) {
    RedisURI uri = RedisURI.create(env("NOLOCK_REDIS_URI", "redis://127.0.0.1:6379"));
    uri.setTimeout(Duration.ofSeconds(2)); // well below the lease TTL; Lettuce's default is 60 s
    RedisClient client = RedisClient.create(uri);
    String app = "example-" + UUID.randomUUID() + ":"; // this run's keys only
    String lockPrefix = app + "lock:";
    String key = app + "invoice:42:status";
    RedisFenceConfig fenceConfig =
        RedisFenceConfig.custom().keyPrefix(app + "fence:").lockKeyPrefix(lockPrefix).build();

    try (StatefulRedisConnection<String, String> connection = client.connect();
        // Two instances of a service, each with its own lock facade (its own owner identity).
        FencedLock first = FencedLock.create(backend(connection, lockPrefix), correctness());
        FencedLock second = FencedLock.create(backend(connection, lockPrefix), correctness())) {
      RedisFence fence = RedisFence.create(connection, fenceConfig);
      fence.establish(0); // once, by an operator, before the fence's first use on this Redis

      AtomicReference<Lease> firstLease = new AtomicReference<>();
      Either<NotAcquired, Either<FenceRejection, Void>> charged =
          first.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                Option<HeldLock> meanwhile =
                    second.tryAcquire("invoice-42", Duration.ofSeconds(10));
                check(meanwhile.isEmpty(), "the second instance got the lock the first one holds");
                firstLease.set(held.lease());
                held.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                return fence.write(held.lease(), key, "charged"); // refused if a newer holder wrote
              });
      check(charged.isRight() && charged.get().isRight(), "the holder's write failed: " + charged);
      System.out.println("first holder, token " + firstLease.get().token().value() + ": charged");

      // The first holder released; the second takes over and writes with a higher token.
      Either<NotAcquired, Either<FenceRejection, Void>> refunded =
          second.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                check(held.token().isNewerThan(firstLease.get().token()), "token not higher");
                System.out.println("second holder, token " + held.token().value() + ": refunded");
                return fence.write(held.lease(), key, "refunded");
              });
      check(refunded.isRight() && refunded.get().isRight(), "the new holder's write failed");

      // A write that arrives late from the first holder (it was paused, say) is refused.
      Either<FenceRejection, Void> late = fence.write(firstLease.get(), key, "charged");
      check(late.isLeft(), "the stale holder's write went through");
      System.out.println("first holder's late write: refused (" + late.getLeft().describe() + ")");

      String status = connection.sync().get(key);
      check("refunded".equals(status), "the invoice is " + status);
    } finally {
      client.shutdown();
    }
    System.out.println("OK: one holder at a time, and the stale write did not land");
  }

  private static LockConfig correctness() {
    return LockConfig.ofDefaults(LockPurpose.CORRECTNESS);
  }

  private static RedisLockBackend backend(
      StatefulRedisConnection<String, String> connection, String keyPrefix) {
    return RedisLockBackend.create(
        connection, RedisLockBackendConfig.custom().keyPrefix(keyPrefix).build());
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
