package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.BoundedScriptCall;
import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.RedisFailures;
import dev.nolock.lock.redis.internal.ReleaseSubscription;
import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;
import java.util.stream.Stream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * <p><b>Waiting in turn</b> ({@link FairLockBackend}), when made with {@link #connect}: a waiting
 * {@code FencedLock.acquire} keeps a place in the lock's queue (three sorted sets beside the lease,
 * see {@link RedisLockBackendConfig}) and is woken by the release, which publishes the identity of
 * the waiter first in the queue on the release channel; a second connection from the same client,
 * opened by the first acquire that has to wait, subscribes to it, and proves with a probe message
 * now and then that it is heard. The scripts judge patience and places on the server's clock
 * ({@code TIME}) and order the queue by arrival, so a clock step there moves when places expire,
 * never the order or who holds the lease. A backend made with {@link #create} on a connection has
 * no client to subscribe with: its waiting acquires poll, as do all while the subscription is down
 * or not heard (then for a minute or more), and while the server refuses the queue's script for a
 * permission. The wake-up is a hint: a release frees the lease whatever its {@code PUBLISH} does.
 *
 * <p>Thread-safe: Lettuce connections are thread-safe and every call is one script. Failures of the
 * connection or the server, and a script without an answer within the command timeout, are {@link
 * dev.nolock.patterns.BackendUnavailableException}s (whether it took effect is unknown; never a
 * refusal or {@code false}); a key under the prefix that holds another type is an {@link
 * IllegalStateException}.
 */
public final class RedisLockBackend implements FairLockBackend, AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(RedisLockBackend.class);
  private static final int RETRY_SECONDS = 60;
  private static final long NEVER = Long.MIN_VALUE;

  private final StatefulRedisConnection<String, String> connection;
  private final RedisCommands<String, String> redis;
  private final RedisScriptingAsyncCommands<String, String> scripts;
  private final RedisLockBackendConfig config;
  private final boolean ownsConnection;
  private final ReleaseSubscription releases; // null when made on a connection: waiters poll
  private volatile long queueRefusedAt = NEVER; // when the server last refused the queue's script

  private RedisLockBackend(
      StatefulRedisConnection<String, String> connection,
      RedisLockBackendConfig config,
      RedisClient client) {
    this.connection = Objects.requireNonNull(connection, "connection");
    this.config = Objects.requireNonNull(config, "config");
    this.redis = connection.sync();
    this.scripts = connection.async();
    this.ownsConnection = client != null;
    this.releases =
        client == null
            ? null
            : new ReleaseSubscription(client, connection, config.releaseChannel());
    commandTimeout();
  }

  /**
   * A backend on {@code connection} with the default key prefix. The caller keeps owning the
   * connection: {@link #close()} leaves it open. Waiting acquires poll ({@link #connect} queues
   * them and wakes them on release).
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisLockBackend create(StatefulRedisConnection<String, String> connection) {
    return create(connection, RedisLockBackendConfig.ofDefaults());
  }

  /**
   * A backend on {@code connection} with {@code config}. The caller keeps owning the connection:
   * {@link #close()} leaves it open. Waiting acquires poll ({@link #connect} queues them and wakes
   * them on release).
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisLockBackend create(
      StatefulRedisConnection<String, String> connection, RedisLockBackendConfig config) {
    return new RedisLockBackend(connection, config, null);
  }

  /**
   * A backend on a new connection from {@code client}; {@link #close()} closes that connection.
   * Waiting acquires wait in turn: the first that has to wait opens a second connection from {@code
   * client}, subscribed to the release channel, which {@link #close()} closes too.
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
      return new RedisLockBackend(connection, config, client);
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
            keys(config.leaseKey(name), config.releaseMarkerKey(name, token), name),
            value,
            // The call's id: Lettuce's resend of this call carries it, a second call does not.
            UUID.randomUUID().toString(),
            wholeMillisUp(commandTimeout()),
            config.releaseChannel());
    return released != null && released == 1L;
  }

  /**
   * The fair acquire ({@link FairLockBackend}): one script that grants only on the waiter's turn
   * and otherwise keeps its place in the lock's queue; see {@code Scripts.ACQUIRE_IN_TURN}.
   *
   * <p>When the server refuses that script for a missing permission (an ACL written for the scripts
   * of 0.1), the plain acquire is sent instead, with the same owner (if the refused script had
   * granted before it failed, the plain acquire finds that grant and answers its token), and
   * waiting goes without the queue for {@value #RETRY_SECONDS} s, then tries it again; the first
   * time with a warning.
   */
  @Override
  public Option<FencingToken> tryAcquireInTurn(
      String name, String owner, Duration ttl, String waiter, Duration place, Duration patience) {
    requireOwner(owner);
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    String what = "acquire lock \"" + name + "\" in turn";
    String[] keys = keys(config.leaseKey(name), config.counterKey(name), name);
    String ttlMillis = millis(ttl);
    String placeMillis = wholeMillisUp(requireNotNegative("place", place));
    String patienceMillis = wholeMillisUp(requireNotNegative("patience", patience));
    requireOpen();
    if (queueRefusedLately()) {
      return tryAcquire(name, owner, ttl);
    }
    String token;
    try {
      token =
          BoundedScriptCall.run(
              scripts,
              Scripts.ACQUIRE_IN_TURN,
              ScriptOutputType.VALUE,
              commandTimeout(),
              keys,
              owner,
              ttlMillis,
              waiter,
              placeMillis,
              patienceMillis);
    } catch (RedisCommandExecutionException e) {
      if (!refusedByAcl(e)) {
        throw RedisFailures.translate(e, what);
      }
      boolean first = queueRefusedAt == NEVER;
      queueRefusedAt = System.nanoTime();
      if (first) {
        LOG.warn(
            "Lock prefix {}: Redis refused the queue's script ({}); waiting acquires poll"
                + " without the queue. Allow this user the commands of RedisScripts.ACQUIRE_IN_TURN"
                + " and PUBLISH and SUBSCRIBE on {}; the backend tries again every {} s.",
            config.keyPrefix(),
            e.getMessage(),
            config.releaseChannel(),
            RETRY_SECONDS);
      }
      return tryAcquire(name, owner, ttl);
    } catch (RedisException e) {
      throw RedisFailures.translate(e, what);
    }
    return token == null ? Option.none() : Option.some(FencingToken.of(Long.parseLong(token)));
  }

  /**
   * Whether Redis refused a script for a permission: {@code NOPERM}, or inside a script on Redis
   * 7.0 "The user executing the script can't run this command or subcommand".
   */
  private static boolean refusedByAcl(RedisCommandExecutionException e) {
    String message = String.valueOf(e.getMessage());
    return message.contains("NOPERM")
        || message.contains("user executing the script can't") // Redis 7.0, inside a script
        || message.contains("ACL failure in script") // Redis 7.2 on, and Valkey
        || message.contains("no permissions");
  }

  /**
   * Refuses a wait's call once {@link #close()} has begun, before anything is sent: a waiter of
   * this backend woken meanwhile must not take a place again, or a grant, on a connection about to
   * close.
   */
  private void requireOpen() {
    if (releases != null && releases.isClosed()) {
      throw new IllegalStateException(
          "This RedisLockBackend was closed while the acquire waited; nothing was sent. Create a"
              + " new backend to acquire again.");
    }
  }

  private boolean queueRefusedLately() {
    long refused = queueRefusedAt;
    return refused != NEVER && System.nanoTime() - refused < RETRY_SECONDS * 1_000_000_000L;
  }

  @Override
  public void leaveQueue(String name, String waiter) {
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    run(
        Scripts.LEAVE_QUEUE,
        ScriptOutputType.INTEGER,
        "leave the queue of lock \"" + name + "\"; the place expires on its own",
        config.queueKeys(name).toArray(String[]::new),
        waiter,
        config.releaseChannel());
  }

  /**
   * Whether waiting acquires can be woken now: made with {@link #connect}, not closed, the queue's
   * script not refused within {@value #RETRY_SECONDS} s, and the subscription to the release
   * channel proven to deliver (before the first wait there is none yet; see {@code
   * ReleaseSubscription}).
   */
  @Override
  public boolean wakesWaiters() {
    return releases != null && !queueRefusedLately() && releases.wakes();
  }

  /**
   * Wakes {@code wake} when a message on the release channel names {@code waiter}, and once
   * whenever the subscription is confirmed (at first, and after Lettuce reconnected it: releases
   * may have been missed meanwhile) or found not to deliver, until closed. The first call opens the
   * subscription; when none may be opened now, or on a backend made with {@link #create}, a
   * subscription that never wakes.
   */
  @Override
  public Subscription onRelease(String name, String waiter, Runnable wake) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    Objects.requireNonNull(wake, "wake");
    if (releases == null || releases.isClosed()) {
      return Subscription.NEVER;
    }
    ReleaseSubscription.Waiter registered = new ReleaseSubscription.Waiter(name, wake);
    if (!releases.register(waiter, registered)) {
      return Subscription.NEVER;
    }
    return () -> releases.unregister(waiter, registered);
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

  /**
   * Closes the connections {@link #connect} and waiting opened: first the subscription, then, after
   * giving up the places of the acquires still waiting (so that waiters elsewhere need not wait for
   * them to expire; after the first that fails no other is tried), the backend's own; then wakes
   * those waiters, whose next call fails with an {@link IllegalStateException} before anything is
   * sent. On a backend made with {@link #create} does nothing. Idempotent.
   */
  @Override
  public void close() {
    if (releases != null) {
      releases.close(this::leaveQueue);
    }
    if (ownsConnection) {
      connection.close();
    }
    if (releases != null) {
      releases.wakeAll();
    }
  }

  private String[] keys(String name) {
    return new String[] {config.leaseKey(name), config.counterKey(name)};
  }

  /** {@code first} and {@code second}, then the keys of the queue of {@code name}. */
  private String[] keys(String first, String second, String name) {
    return Stream.concat(Stream.of(first, second), config.queueKeys(name).stream())
        .toArray(String[]::new);
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

  private static Duration requireNotNegative(String what, Duration duration) {
    Objects.requireNonNull(duration, what);
    if (duration.isNegative()) {
      throw new IllegalArgumentException(
          "The " + what + " must not be negative, got " + duration + ".");
    }
    return duration;
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
