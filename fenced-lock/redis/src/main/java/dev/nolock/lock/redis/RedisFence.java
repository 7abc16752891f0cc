package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisFailures;
import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import io.lettuce.core.RedisException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Either;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The resource-side check for data in Redis, beside the SQL {@link dev.nolock.patterns.Fence}: a
 * write that carries a stale {@link FencingToken} is refused by Redis itself, whatever the writer
 * believes about its lease.
 *
 * <p>Guarantee: for each lock name, once a write with token {@code t} from owner {@code o} went
 * through this fence, no write with a token lower than {@code t}, and none with {@code t} from
 * another owner, goes through it. A refused write changes nothing, including keys the newer holder
 * has not written yet, because the fence guards what the <em>lock</em> guards: there is one fence
 * per lock name, not one per data key.
 *
 * <p>Algorithm of {@link #write} / {@link #writeAll}, one Lua script, atomic on the server:
 *
 * <ol>
 *   <li>Read the lock's fence hash ({@code token}, {@code owner}).
 *   <li>If it exists and holds a higher token, or the same token from another owner, return that
 *       token and owner; nothing is written, and the Java side counts the rejection and returns it
 *       as a {@link FenceRejection}.
 *   <li>Otherwise (no fence yet, a lower token, or the same token from the same owner) record
 *       {@code (token, owner)} in the fence hash and {@code SET} every data key, in the same
 *       script.
 * </ol>
 *
 * Equal tokens pass only for the same owner: a backend that loses its counter (a Redis restart
 * without persistence) hands the same token out again, and the fence must not take the second
 * holder for the first.
 *
 * <p><b>The fence must live on the same Redis as the data</b>: a script is atomic on one instance
 * only. On Redis Cluster every key of one call must also hash to the same slot; put {@link
 * #hashTag(String)} of the lock name into each data key (e.g. {@code "orders:" +
 * RedisFence.hashTag("orders") + ":total"}), or the server refuses the call with {@code CROSSSLOT}.
 * Values are written with a plain {@code SET}, which clears a TTL the key had.
 *
 * <p>Thread-safe. Failures of the connection or the server are {@link
 * dev.nolock.patterns.BackendUnavailableException}s: whether the write took effect is then unknown.
 */
public final class RedisFence {

  private final RedisCommands<String, String> redis;
  private final RedisFenceConfig config;

  private RedisFence(StatefulRedisConnection<String, String> connection, RedisFenceConfig config) {
    this.redis = Objects.requireNonNull(connection, "connection").sync();
    this.config = Objects.requireNonNull(config, "config");
  }

  /** A fence with the default key prefix and no metrics; the caller keeps owning the connection. */
  public static RedisFence create(StatefulRedisConnection<String, String> connection) {
    return create(connection, RedisFenceConfig.ofDefaults());
  }

  /** A fence with {@code config}; the caller keeps owning the connection. */
  public static RedisFence create(
      StatefulRedisConnection<String, String> connection, RedisFenceConfig config) {
    return new RedisFence(connection, config);
  }

  /**
   * The Redis Cluster hash tag of a lock name, e.g. <code>{orders}</code>: the part of the fence
   * key that decides its slot. Put it into the data keys the lock guards to keep them in the
   * fence's slot.
   */
  public static String hashTag(String lockName) {
    return RedisKeyNames.hashTag(lockName);
  }

  public RedisFenceConfig config() {
    return config;
  }

  /**
   * Stores {@code value} at {@code key} if {@code lease}'s token is not stale for its lock.
   *
   * @return right (null) when written; the rejection when a newer token, or the same token from
   *     another owner, has written through this lock's fence. On a rejection nothing was written.
   * @throws IllegalArgumentException when {@code key} starts with the fence key prefix
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed
   */
  public Either<FenceRejection, Void> write(Lease lease, String key, String value) {
    Objects.requireNonNull(value, "value");
    return writeAll(lease, Map.of(requireDataKey(key), value));
  }

  /**
   * Stores every entry of {@code values} if {@code lease}'s token is not stale for its lock: all of
   * them or none.
   *
   * @return right (null) when written; the rejection otherwise, with nothing written
   * @throws IllegalArgumentException for no values, or a key that starts with the fence key prefix
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed
   */
  public Either<FenceRejection, Void> writeAll(Lease lease, Map<String, String> values) {
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(values, "values");
    if (values.isEmpty()) {
      throw new IllegalArgumentException(
          "Nothing to write under lock \"" + lease.name() + "\": pass at least one key and value.");
    }
    List<String> keys = new ArrayList<>(values.size() + 1);
    List<String> args = new ArrayList<>(values.size() + 2);
    keys.add(config.fenceKey(lease.name()));
    args.add(Long.toString(lease.token().value()));
    args.add(lease.owner());
    values.forEach(
        (key, value) -> {
          keys.add(requireDataKey(key));
          args.add(Objects.requireNonNull(value, () -> "the value of key " + key));
        });
    List<Object> reply;
    try {
      reply =
          Scripts.FENCED_WRITE.run(
              redis,
              ScriptOutputType.MULTI,
              keys.toArray(String[]::new),
              args.toArray(String[]::new));
    } catch (RedisException e) {
      throw RedisFailures.translate(e, "write through the fence of lock \"" + lease.name() + "\"");
    }
    if (Long.valueOf(1L).equals(reply.get(0))) {
      return Either.right(null);
    }
    config.metrics().fenceRejected();
    return Either.left(
        new FenceRejection(
            lease.name(),
            lease.token(),
            lease.owner(),
            FencingToken.of(Long.parseLong((String) reply.get(1))),
            reply.size() > 2 && reply.get(2) != null ? (String) reply.get(2) : "(unknown)"));
  }

  private String requireDataKey(String key) {
    if (key == null || key.isEmpty()) {
      throw new IllegalArgumentException(
          "A data key is " + (key == null ? "null" : "empty") + ": pass the Redis key to write.");
    }
    if (key.startsWith(config.keyPrefix())) {
      throw new IllegalArgumentException(
          "The data key \""
              + key
              + "\" starts with the fence key prefix \""
              + config.keyPrefix()
              + "\": writing it could overwrite a fence. Keep data keys outside that prefix.");
    }
    return key;
  }

  @Override
  public String toString() {
    return "RedisFence[" + config.keyPrefix() + "]";
  }
}
