package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.testkit.engine.EngineTestKit;

@ExtendWith(RedisExtension.class)
class RedisExtensionIT {

  @Test
  void setThenGetUnderTheClassPrefix(RedisClient client, RedisKeys keys) {
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      String key = keys.key("greeting");

      connection.sync().set(key, "hello");

      assertThat(key).startsWith(keys.prefix()).matches("nolock:t:[0-9a-f]{12}:greeting");
      assertThat(connection.sync().get(key)).isEqualTo("hello");
    }
  }

  @Test
  void resolvesTheUriTheClientUses(RedisURI uri) {
    assertThat(uri.getPort()).isPositive();
    assertThat(uri.getTimeout()).isPositive();
  }

  @Test
  void keysOfAFinishedClassAreDeletedAndOtherKeysAreKept(RedisClient client, RedisKeys keys) {
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      String bystander = keys.key("bystander");
      connection.sync().set(bystander, "stays");
      OtherClass.writtenKey.set(null);

      var results =
          EngineTestKit.engine("junit-jupiter").selectors(selectClass(OtherClass.class)).execute();

      results.testEvents().assertStatistics(stats -> stats.succeeded(1).failed(0));
      String written = OtherClass.writtenKey.get();
      assertThat(written).isNotNull().doesNotStartWith(keys.prefix());
      assertThat(connection.sync().exists(written)).as("key of the finished class").isZero();
      assertThat(connection.sync().get(bystander)).isEqualTo("stays");
    }
  }

  /** Run only through EngineTestKit above; it writes one key under its own prefix. */
  @ExtendWith(RedisExtension.class)
  static class OtherClass {
    static final AtomicReference<String> writtenKey = new AtomicReference<>();

    @Test
    void writesAKey(RedisClient client, RedisKeys keys) {
      try (StatefulRedisConnection<String, String> connection = client.connect()) {
        String key = keys.key("temp");
        connection.sync().set(key, "gone after the class");
        writtenKey.set(key);
        assertThat(connection.sync().exists(key)).isOne();
      }
    }
  }
}
