package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.BoundedScriptCall;
import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.RedisFailures;
import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;

/**
 * A {@link LockBackend} on one Redis server, through Lettuce: a lease key per lock name with a
 * millisecond TTL, and a token counter beside it that only ever grows.
 *
 * <p>Guarantee, judged on the Redis server's clock and as long as that one server keeps its data: a
 * lease is granted only when the name has no unexpired lease; every grant gets a token higher than
 * every earlier grant of the name (a release or an expiry never resets the counter); renewal and
 * release act only on the caller's own {@code (owner, token)}. Safety of the protected data does
 * not rest on this lock but on the fence at the resource ({@code dev.nolock.patterns.sql.Fence} for
 * SQL, {@link RedisFence} for Redis keys), which refuses a stale token.
 *
 * <p>Algorithm, each step one Lua script, atomic on the server (see {@link RedisLockBackendConfig}
 * for the keys):
 *
 * <ol>
 *   <li>Acquire: if the lease key holds another owner's lease, return nil (held). If it holds this
 *       owner's ({@code "owner|t"}: a resend of this call, or the owner's own retry), return {@code
 *       t}, and {@code PEXPIRE} the lease to the TTL if less is left: the caller counts the TTL
 *       from this call. Otherwise {@code INCR} the counter and {@code SET lease "owner|token" PX
 *       ttl}, the TTL rounded up to whole milliseconds; return the token. Granting and bumping
 *       happen together, so no grant goes without a new token and no token is used twice while
 *       Redis keeps its data.
 *   <li>Renew: compare-and-extend. If {@code GET lease} equals {@code "owner|token"}, {@code
 *       PEXPIRE lease ttl} and return 1, else 0. Never a blind {@code PEXPIRE}: an expired lease
 *       that someone else now holds is left alone.
 *   <li>Release: compare-and-delete. Each call draws a random id. If {@code GET lease} equals
 *       {@code "owner|token"}, {@code DEL lease}, {@code SET} the grant's release marker ({@code
 *       lease:released:token}) to the call's id {@code PX} the command timeout, and return 1. Else
 *       return 1 if the marker holds this call's id (an earlier send of this very call freed the
 *       lease), else 0. The counter is never deleted.
 * </ol>
 *
 * Scripts run with {@code EVALSHA}; when the server answers {@code NOSCRIPT} (a restart, a
 * failover, {@code SCRIPT FLUSH}) the same call falls back to {@code EVAL}, which caches the script
 * again. Each waits at most the connection's command timeout, counted from just before it is sent,
 * and is then cancelled: a {@link dev.nolock.patterns.BackendUnavailableException}, outcome
 * unknown.
 *
 * <p><b>After a lost answer.</b> When the connection drops after Redis ran a script but before its
 * answer arrived, Lettuce reconnects and sends the script again by itself, so it runs twice. Each
 * script recognises its own first run and answers what that run did: the acquire finds its own
 * lease and returns its token (nothing new is granted); the renew finds its own value and extends
 * again; the release finds its marker, kept as long as the caller can still hear an answer (the
 * command timeout from before the send), and answers true. So a caller never hears a false refusal.
 * A resend that runs after the caller gave up is answered to nobody: an acquire's lease then blocks
 * others for its TTL at most, unless renewed.
 *
 * <p><b>A single-instance lock.</b> Redis replication is asynchronous: a primary can grant a lease
 * (and bump the counter), then fail before a replica received it, and the promoted replica grants
 * the lease again, possibly with a token that was already handed out. {@code WAIT} narrows that
 * window but does not close it: a write acknowledged by replicas can still be lost in a failover,
 * and {@code WAIT} rolls nothing back (see "Consistency and WAIT" in the Redis documentation of <a
 * href="https://redis.io/docs/latest/commands/wait/">WAIT</a>, and the maintainers' answer in <a
 * href="https://github.com/redis/redis-doc/issues/1863">redis/redis-doc#1863</a>: strong
 * consistency is outside Redis's scope). There is no Redlock here.
 *
 * <p><b>Without persistence a restart resets the counters.</b> Every lease and counter is lost, so
 * tokens start again at 1: the fence still refuses every write with a reused token (safety holds),
 * but it also refuses the new holders until the counter passes the fence's highest token, which
 * {@link #ensureTokensAbove} does. Run Redis with {@code appendonly yes} and {@code appendfsync
 * always} to keep the counters across restarts (not across a failover to an asynchronous replica).
 *
 * <p>Thread-safe: Lettuce connections are thread-safe and every call is one script. Failures of the
 * connection or the server, and a script without an answer within the command timeout, are {@link
 * dev.nolock.patterns.BackendUnavailableException}s (whether it took effect is unknown; never a
 * refusal or {@code false}); a key under the prefix that holds another type is an {@link
 * IllegalStateException}.
 */
public final class RedisLockBackend implements LockBackend, AutoCloseable {

  private final StatefulRedisConnection<String, String> connection;
  private final RedisCommands<String, String> redis;
  private final RedisScriptingAsyncCommands<String, String> scripts;
  private final RedisLockBackendConfig config;
  private final boolean ownsConnection;

  private RedisLockBackend(
      StatefulRedisConnection<String, String> connection,
      RedisLockBackendConfig config,
      boolean ownsConnection) {
    this.connection = Objects.requireNonNull(connection, "connection");
    this.config = Objects.requireNonNull(config, "config");
    this.redis = connection.sync();
    this.scripts = connection.async();
    this.ownsConnection = ownsConnection;
    commandTimeout();
  }

  /**
   * A backend on {@code connection} with the default key prefix. The caller keeps owning the
   * connection: {@link #close()} leaves it open.
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisLockBackend create(StatefulRedisConnection<String, String> connection) {
    return create(connection, RedisLockBackendConfig.ofDefaults());
  }

  /**
   * A backend on {@code connection} with {@code config}. The caller keeps owning the connection:
   * {@link #close()} leaves it open.
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisLockBackend create(
      StatefulRedisConnection<String, String> connection, RedisLockBackendConfig config) {
    return new RedisLockBackend(connection, config, false);
  }

  /**
   * A backend on a new connection from {@code client}; {@link #close()} closes that connection.
   *
   * @throws dev.nolock.patterns.BackendUnavailableException when the connection cannot be made
   * @throws IllegalArgumentException when the client's URI sets no positive command timeout
   */
  public static RedisLockBackend connect(RedisClient client, RedisLockBackendConfig config) {
    Objects.requireNonNull(client, "client");
    Objects.requireNonNull(config, "config");
    StatefulRedisConnection<String, String> connection;
    try {
      connection = client.connect();
    } catch (RedisException e) {
      throw RedisFailures.translate(e, "open a connection for the lock backend");
    }
    try {
      return new RedisLockBackend(connection, config, true);
    } catch (IllegalArgumentException e) {
      connection.close();
      throw e;
    }
  }

  public RedisLockBackendConfig config() {
    return config;
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    requireOwner(owner);
    String token =
        run(
            Scripts.ACQUIRE,
            ScriptOutputType.VALUE,
            "acquire lock \"" + name + "\"",
            keys(name),
            owner,
            millis(ttl));
    return token == null ? Option.none() : Option.some(FencingToken.of(Long.parseLong(token)));
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    Long renewed =
        run(
            Scripts.RENEW,
            ScriptOutputType.INTEGER,
            "renew lock \"" + name + "\"",
            new String[] {config.leaseKey(name)},
            leaseValue(owner, token),
            millis(ttl));
    return renewed != null && renewed == 1L;
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    String value = leaseValue(owner, token);
    Long released =
        run(
            Scripts.RELEASE,
            ScriptOutputType.INTEGER,
            "release lock \"" + name + "\"",
            new String[] {config.leaseKey(name), config.releaseMarkerKey(name, token)},
            value,
            // The call's id: Lettuce's resend of this call carries it, a second call does not.
            UUID.randomUUID().toString(),
            wholeMillisUp(commandTimeout()));
    return released != null && released == 1L;
  }

  /** A GET of the lease key: Redis drops the key when its PX expiry passes, so present = held. */
  @Override
  public Option<LeaseHolder> holder(String name) {
    String value;
    try {
      value = redis.get(config.leaseKey(name));
    } catch (RedisException e) {
      throw RedisFailures.translate(e, "read who holds lock \"" + name + "\"");
    }
    if (value == null) {
      return Option.none();
    }
    int bar = value.lastIndexOf('|');
    return Option.some(
        new LeaseHolder(
            value.substring(0, bar), FencingToken.of(Long.parseLong(value.substring(bar + 1)))));
  }

  /**
   * Makes every later grant of {@code name} get a token above {@code floor}: raises the counter to
   * {@code floor} if it is lower, and leaves it alone otherwise. Idempotent and safe to call at any
   * time, also while the lock is held.
   *
   * <p>The remedy after a Redis restart that lost the counters (no persistence): until the counter
   * passes the highest token the fence has accepted, the fence refuses every new holder. Read that
   * token from the fence ({@code select token from nolock_fences where name = ?}, or the {@code
   * token} field of the {@link RedisFence} hash) and pass it here.
   *
   * @param floor the highest token already used, zero or more
   * @return the counter afterwards; the next grant's token is higher
   */
  public long ensureTokensAbove(String name, long floor) {
    if (floor < 0 || floor == Long.MAX_VALUE) {
      throw new IllegalArgumentException(
          "The token floor must be between 0 and "
              + (Long.MAX_VALUE - 1)
              + ", got "
              + floor
              + ": pass the highest token the fence has accepted for \""
              + name
              + "\".");
    }
    String counter =
        run(
            Scripts.ENSURE_TOKENS_ABOVE,
            ScriptOutputType.VALUE,
            "raise the token counter of lock \"" + name + "\"",
            new String[] {config.counterKey(name)},
            Long.toString(floor));
    return Long.parseLong(counter);
  }

  /** Closes the connection if {@link #connect} opened it; otherwise does nothing. Idempotent. */
  @Override
  public void close() {
    if (ownsConnection) {
      connection.close();
    }
  }

  private String[] keys(String name) {
    return new String[] {config.leaseKey(name), config.counterKey(name)};
  }

  private <T> T run(
      LuaScript script, ScriptOutputType type, String what, String[] keys, String... args) {
    try {
      return BoundedScriptCall.run(scripts, script, type, commandTimeout(), keys, args);
    } catch (RedisException e) {
      throw RedisFailures.translate(e, what);
    }
  }

  /**
   * How long one script call waits for Redis: the connection's command timeout, read at each call.
   * It also bounds how long a resend of the call can still be answered to the caller, which is how
   * long a release marker is kept.
   */
  private Duration commandTimeout() {
    return BoundedScriptCall.commandTimeout(
        connection,
        "RedisLockBackend must bound how long a call waits and how long a lost answer can be"
            + " resent");
  }

  private static String leaseValue(String owner, FencingToken token) {
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    return owner + '|' + token.value();
  }

  private static void requireOwner(String owner) {
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
  }

  /**
   * The TTL to send as {@code PX}, in whole milliseconds rounded up: the holder counts the whole
   * {@code ttl}, so the server must keep the lease at least as long, never a fraction shorter.
   */
  private static String millis(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.toMillis() < 1) {
      throw new IllegalArgumentException(
          "A Redis lease TTL must be at least 1 ms (PX counts milliseconds), got "
              + ttl
              + ": pass a TTL a few times longer than the critical section.");
    }
    return wholeMillisUp(ttl);
  }

  private static String wholeMillisUp(Duration duration) {
    long millis = duration.toMillis();
    return Long.toString(duration.equals(Duration.ofMillis(millis)) ? millis : millis + 1);
  }

  @Override
  public String toString() {
    return "RedisLockBackend[" + config.keyPrefix() + "]";
  }
}
