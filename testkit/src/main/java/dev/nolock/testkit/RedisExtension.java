package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import dev.nolock.testkit.internal.UniqueNames;
import io.lettuce.core.KeyScanCursor;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Connects a test class to the real Redis server: resolves Lettuce {@link RedisClient} and {@link
 * RedisURI}, and a {@link RedisKeys} prefix of the class's own.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>the server must accept a TCP connection, else the class fails with {@link
 *       ServerUnreachableException} naming {@code scripts/services up redis};
 *   <li>one client and one key prefix per class ({@code @Nested} classes share them); a command
 *       timeout of 10 s applies unless the URI sets its own;
 *   <li>after the class the keys under the prefix are deleted (with {@code SCAN} and {@code
 *       UNLINK}; the database is never flushed) and the client is shut down, which closes the
 *       connections made from it.
 * </ol>
 *
 * Keys a test writes outside the prefix are not cleaned up. Needs {@code io.lettuce:lettuce-core}.
 */
public final class RedisExtension implements BeforeAllCallback, ParameterResolver {

  private static final Set<Class<?>> RESOLVED =
      Set.of(RedisClient.class, RedisURI.class, RedisKeys.class);

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public RedisExtension() {
    this(Endpoints.fromEnvironment());
  }

  public RedisExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    resources(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return RESOLVED.contains(parameter.getParameter().getType());
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    Resources resources = resources(context);
    Class<?> type = parameter.getParameter().getType();
    if (type == RedisClient.class) {
      return resources.client();
    }
    return type == RedisURI.class ? resources.uri() : resources.keys();
  }

  private Resources resources(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context, RedisExtension.class, endpoints, Resources.class, this::create);
  }

  private Closing<Resources> create() {
    Reachability.requireReachable(
        Server.REDIS, HostPort.ofRedisUri(endpoints.redisUri(), Server.REDIS));
    RedisURI uri = RedisURI.create(endpoints.redisUri());
    if (uri.getTimeout().equals(RedisURI.DEFAULT_TIMEOUT_DURATION)) {
      // Lettuce's default is a minute; a stalled server should fail a test sooner.
      uri.setTimeout(Duration.ofSeconds(10));
    }
    RedisClient client = RedisClient.create(uri);
    RedisKeys keys = new RedisKeys("nolock:t:" + UniqueNames.hex12() + ":");
    return new Closing<>(
        new Resources(client, uri, keys),
        () -> {
          try {
            deleteKeys(client, keys);
          } finally {
            client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
          }
        });
  }

  private static void deleteKeys(RedisClient client, RedisKeys keys) {
    try (StatefulRedisConnection<String, String> connection = client.connect()) {
      RedisCommands<String, String> redis = connection.sync();
      ScanArgs match = ScanArgs.Builder.matches(keys.prefix() + "*").limit(500);
      ScanCursor cursor = ScanCursor.INITIAL;
      do {
        KeyScanCursor<String> page = redis.scan(cursor, match);
        if (!page.getKeys().isEmpty()) {
          redis.unlink(page.getKeys().toArray(String[]::new));
        }
        cursor = page;
      } while (!cursor.isFinished());
    }
  }

  private record Resources(RedisClient client, RedisURI uri, RedisKeys keys) {}
}
