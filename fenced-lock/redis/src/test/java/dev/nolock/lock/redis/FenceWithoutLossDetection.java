package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.patterns.Lease;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The negative control of the state-loss tests: the fenced write as {@code RedisFence} did it
 * before it could tell that Redis had lost its state. One hash per lock ({@code token}, {@code
 * owner}); a missing hash reads as "no write yet", so after a restart without persistence, a {@code
 * FLUSHALL}/{@code FLUSHDB}, an eviction or a failover to a replica that lacks the hash, any token
 * passes.
 */
final class FenceWithoutLossDetection {

  private static final String SCRIPT =
      """
      local function greater(a, b)
        if #a ~= #b then
          return #a > #b
        end
        return a > b
      end
      local stored = redis.call('HMGET', KEYS[1], 'token', 'owner')
      local token, owner = stored[1], stored[2]
      if token and (greater(token, ARGV[1]) or (token == ARGV[1] and owner ~= ARGV[2])) then
        return {0, token, owner}
      end
      redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2])
      for i = 2, #KEYS do
        redis.call('SET', KEYS[i], ARGV[i + 1])
      end
      return {1}
      """;

  private final StatefulRedisConnection<String, String> connection;
  private final String keyPrefix;

  FenceWithoutLossDetection(StatefulRedisConnection<String, String> connection, String keyPrefix) {
    this.connection = connection;
    this.keyPrefix = keyPrefix;
  }

  /** The per-lock fence hash this control keeps. */
  String fenceKey(String lockName) {
    return keyPrefix + RedisKeyNames.hashTag(lockName);
  }

  /** True when written, false when the hash held a newer token (or the same from another owner). */
  boolean write(Lease lease, String key, String value) {
    return writeAll(lease, Map.of(key, value));
  }

  /** Every value or none, as {@link #write}. */
  boolean writeAll(Lease lease, Map<String, String> values) {
    List<String> keys = new ArrayList<>(List.of(fenceKey(lease.name())));
    List<String> args =
        new ArrayList<>(List.of(Long.toString(lease.token().value()), lease.owner()));
    values.forEach(
        (key, value) -> {
          keys.add(key);
          args.add(value);
        });
    List<Object> reply =
        connection
            .sync()
            .eval(
                SCRIPT,
                ScriptOutputType.MULTI,
                keys.toArray(String[]::new),
                args.toArray(String[]::new));
    return Long.valueOf(1L).equals(reply.get(0));
  }
}
