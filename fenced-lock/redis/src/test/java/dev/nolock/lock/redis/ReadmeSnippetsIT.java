package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.testkit.ReadmeSnippet;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's usage snippet, run: only the key prefixes differ, so tests never collide. */
@ExtendWith(RedisExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  @Test
  void theReadmeSnippetChargesTheInvoiceUnderTheLockThroughTheFence(
      RedisClient client, RedisKeys keys) {
    MeterRegistry registry = new SimpleMeterRegistry();
    String lockPrefix = keys.key("lock:");
    String fencePrefix = keys.key("fence:");
    String key = keys.key("invoice:42:status");

    try (StatefulRedisConnection<String, String> operator = client.connect()) {
      // --- README: Usage, establishing ---
      RedisFence.create(operator, RedisFenceConfig.custom().keyPrefix(fencePrefix).build())
          .establish(0);
      // --- end of establishing ---
    }

    // --- README: Usage ---
    try (StatefulRedisConnection<String, String> connection = client.connect();
        FencedLock locks =
            FencedLock.create(
                RedisLockBackend.create(
                    connection, RedisLockBackendConfig.custom().keyPrefix(lockPrefix).build()),
                LockConfig.custom(LockPurpose.CORRECTNESS).metrics(registry, "billing").build())) {
      RedisFence fence =
          RedisFence.create(
              connection,
              RedisFenceConfig.custom()
                  .keyPrefix(fencePrefix)
                  .lockKeyPrefix(lockPrefix) // refuses data keys among the lock's keys
                  .metrics(registry, "billing")
                  .build());

      Either<NotAcquired, Either<FenceRejection, Void>> result =
          locks.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                held.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                return fence.write(held.lease(), key, "charged"); // refused if a newer holder wrote
              });
      // --- end of snippet ---

      assertThat(result.isRight()).isTrue();
      assertThat(result.get().isRight()).isTrue();
      assertThat(connection.sync().get(key)).isEqualTo("charged");
      assertThat(registry.get("nolock.acquire.wait").tag("outcome", "acquired").timer().count())
          .isEqualTo(1);
    }
  }

  /** The README shows the code the test above runs, with the test's client and key prefixes. */
  @Test
  void theReadmeShowsTheCodeTheUsageTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "MeterRegistry registry = new SimpleMeterRegistry();  // or your application's registry"
                + " RedisURI uri = RedisURI.create(\"redis://127.0.0.1:6379\");"
                + " uri.setTimeout(Duration.ofSeconds(2));          // well below the lease TTL;"
                + " Lettuce's default is 60 s RedisClient client = RedisClient.create(uri); String"
                + " key = \"invoice:42:status\";")
        .replacing("\"billing:lock:\"", "lockPrefix")
        .replacing("\"billing:fence:\"", "fencePrefix")
        .readmeOnly("finally { client.shutdown(); }")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }

  /** The README shows the code the test above runs, on the test's operator connection. */
  @Test
  void theReadmeShowsTheCodeTheEstablishingTestRuns() {
    ReadmeSnippet.javaBlock(README, "establishes it; nothing was issued yet")
        .replacing("RedisFence.create(connection,", "RedisFence.create(operator,")
        .replacing("\"billing:fence:\"", "fencePrefix")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage, establishing");
  }
}
