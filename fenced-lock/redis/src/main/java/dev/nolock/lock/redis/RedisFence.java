package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.BoundedScriptCall;
import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.RedisFailures;
import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;

/**
 * The resource-side check for data in Redis, beside the SQL {@code dev.nolock.patterns.sql.Fence}:
 * a write that carries a stale {@link FencingToken} is refused by Redis itself, whatever the writer
 * believes about its lease — also when that Redis loses state.
 *
 * <p>Guarantee: for each lock name, once a write with token {@code t} from owner {@code o} went
 * through this fence, no write with a token lower than {@code t}, and none with {@code t} from
 * another owner, goes through it. A refused write changes nothing, including keys the newer holder
 * has not written yet, because the fence guards what the <em>lock</em> guards: there is one entry
 * per lock name, not one per data key. A data key in the fence's own key space or in the lock
 * backend's ({@link RedisFenceConfig#lockKeyPrefix()}) is refused before anything is sent, so a
 * fenced write can never reset the token counter the guarantee rests on. The guarantee holds across
 * a Redis restart without persistence, {@code FLUSHALL}/{@code FLUSHDB}, an eviction, a failover
 * and a failback to the process it was established on: the fence detects each and refuses every
 * write ({@link FenceNotEstablishedException}) until an operator {@linkplain #establish(long)
 * establishes} it again with a floor at or above every token issued before; the guarantee after
 * that rests on the floor being right.
 *
 * <p>Why the fence cannot simply start again: the lock's token counter lives in the same Redis and
 * is lost with it, so after a loss the next holder gets a low token (1 after a flush), writes, and
 * the stale holder's higher token would then pass too. The fence therefore keeps its whole state in
 * one hash ({@link RedisFenceConfig#stateKey()}), established once by an operator; that hash is
 * lost whole or not at all. The server identity recorded in it when it was established tells a
 * server whose copy may be behind from the one it was established on: the {@code run_id} changes
 * with every restart and differs on a promoted replica; the replication id ({@code master_replid})
 * changes when the same process was a replica and is promoted again, after a full resync that may
 * have replaced the state by a lagging copy. (It also changes, without a loss, when a primary gets
 * its first replica or frees its replication backlog after {@code repl-backlog-ttl}; the fence then
 * refuses too, until an operator {@linkplain #resumeWithSurvivingState() resumes}.)
 *
 * <p>Algorithm of {@link #write} / {@link #writeAll}: one read, then one Lua script, atomic on the
 * server:
 *
 * <ol>
 *   <li>Read the state's write horizon: the sequence number of the last applied write and the
 *       establishment id. Every send of this call's script runs after this read.
 *   <li>Script: read the server's {@code run_id} ({@code INFO server}), its {@code master_replid}
 *       ({@code INFO replication}) and the server identity the state was established on. None:
 *       refuse, {@link FenceNotEstablishedException.Reason#NO_STATE}.
 *   <li>If the state remembers this call's write id, an earlier send of this same call was applied
 *       (Lettuce resends a command whose answer was lost): report it written and do nothing.
 *   <li>If write ids applied after the horizon were forgotten since (the state remembers the last
 *       {@link RedisFenceConfig#rememberedWrites()}), or the fence was established again since, an
 *       earlier send of this call may have been applied and forgotten: do nothing, and report the
 *       outcome unknown ({@link dev.nolock.patterns.BackendUnavailableException}) — never a
 *       refusal, never a second application.
 *   <li>Established on another {@code run_id}: refuse, {@link
 *       FenceNotEstablishedException.Reason#ESTABLISHED_ON_ANOTHER_SERVER}. Established on this one
 *       but with another {@code master_replid}: refuse, {@link
 *       FenceNotEstablishedException.Reason#REPLICATION_ID_CHANGED}.
 *   <li>Read the lock's entry ({@code token|owner}). If it holds a higher token, or the same token
 *       from another owner, refuse with a {@link FenceRejection} naming it; nothing is written.
 *   <li>A token at or below the fence's floor: refuse with a {@link FenceRejection} whose current
 *       token is the floor and current owner {@value #FLOOR_OWNER}.
 *   <li>Otherwise record {@code (token, owner)} as the lock's entry, remember the write id under
 *       the next sequence number, forget the oldest beyond the number to remember, and {@code SET}
 *       every data key — all in the same script. No clock is read: how long an id is remembered is
 *       counted in writes, so a clock step on the Redis host changes nothing.
 * </ol>
 *
 * Equal tokens pass only for the same owner: a backend that loses its counter hands the same token
 * out again, and the fence must not take the second holder for the first.
 *
 * <p><b>The fence must live on the same Redis as the data</b>, a standalone server (or the primary
 * Sentinel points to): a script is atomic on one instance only, and every key of one call must be
 * there. Values are written with a plain {@code SET}, which clears a TTL the key had.
 *
 * <p>Thread-safe. Each command of a call waits for Redis at most the connection's command timeout
 * and is then cancelled (so Lettuce does not send it again later). Failures of the connection or
 * the server are {@link dev.nolock.patterns.BackendUnavailableException}s: whether the write took
 * effect is then unknown.
 */
public final class RedisFence {

  /** The current owner of a {@link FenceRejection} that refused a token at or below the floor. */
  public static final String FLOOR_OWNER = "(fence floor)";

  private final StatefulRedisConnection<String, String> connection;
  private final RedisScriptingAsyncCommands<String, String> redis;
  private final RedisFenceConfig config;

  private RedisFence(StatefulRedisConnection<String, String> connection, RedisFenceConfig config) {
    this.connection = Objects.requireNonNull(connection, "connection");
    this.redis = connection.async();
    this.config = Objects.requireNonNull(config, "config");
    commandTimeout();
  }

  /**
   * A fence with the default key prefix and no metrics; the caller keeps owning the connection.
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisFence create(StatefulRedisConnection<String, String> connection) {
    return create(connection, RedisFenceConfig.ofDefaults());
  }

  /**
   * A fence with {@code config}; the caller keeps owning the connection.
   *
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static RedisFence create(
      StatefulRedisConnection<String, String> connection, RedisFenceConfig config) {
    return new RedisFence(connection, config);
  }

  public RedisFenceConfig config() {
    return config;
  }

  /**
   * Stores {@code value} at {@code key} if {@code lease}'s token is not stale for its lock.
   *
   * @return right (null) when written (by this send or by an earlier send of this same call); the
   *     rejection when a newer token, or the same token from another owner, has written through
   *     this lock's fence, or the token is at or below the fence's floor. On a rejection nothing of
   *     this call was written, by any send.
   * @throws IllegalArgumentException when {@code key} starts with the fence key prefix, or lies in
   *     the lock backend's key space ({@link RedisFenceConfig#lockKeyPrefix()} or the default lock
   *     prefix, followed by <code>{</code>)
   * @throws FenceNotEstablishedException when the fence's state is not established on this server:
   *     nothing is written until an operator establishes it
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed, or a resend could
   *     not tell whether an earlier send was applied: unknown whether written
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
   *     or lies in the lock backend's key space
   * @throws FenceNotEstablishedException when the fence's state is not established on this server
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed, or a resend could
   *     not tell whether an earlier send was applied: unknown whether written
   */
  public Either<FenceRejection, Void> writeAll(Lease lease, Map<String, String> values) {
    Objects.requireNonNull(lease, "lease");
    Objects.requireNonNull(values, "values");
    if (values.isEmpty()) {
      throw new IllegalArgumentException(
          "Nothing to write under lock \"" + lease.name() + "\": pass at least one key and value.");
    }
    Duration timeout = commandTimeout();
    String what = "write through the fence of lock \"" + lease.name() + "\"";
    List<String> keys = new ArrayList<>(values.size() + 1);
    List<String> valueArgs = new ArrayList<>(values.size());
    keys.add(config.stateKey());
    values.forEach(
        (key, value) -> {
          keys.add(requireDataKey(key));
          valueArgs.add(Objects.requireNonNull(value, () -> "the value of key " + key));
        });
    // Read before any send of the script: a send that was applied got a later sequence number.
    List<Object> horizon =
        run(Scripts.FENCE_HORIZON, what, timeout, new String[] {config.stateKey()});
    List<String> args = new ArrayList<>(values.size() + 7);
    args.add(Long.toString(lease.token().value()));
    args.add(lease.owner());
    args.add(lease.name());
    // One id per call: a resend by Lettuce repeats it, a new call never does.
    args.add(UUID.randomUUID().toString());
    args.add((String) horizon.get(0));
    args.add((String) horizon.get(1));
    args.add(Integer.toString(config.rememberedWrites()));
    args.addAll(valueArgs);
    List<Object> reply =
        run(
            Scripts.FENCED_WRITE,
            what,
            timeout,
            keys.toArray(String[]::new),
            args.toArray(String[]::new));
    long outcome = (Long) reply.get(0);
    if (outcome == 1L || outcome == 2L) {
      return Either.right(null);
    }
    if (outcome == 7L || outcome == 8L) {
      throw new BackendUnavailableException(
          "RedisFence cannot tell whether the write of lock \""
              + lease.name()
              + "\" took effect: this send changed nothing, but an earlier send of the same call"
              + " (Lettuce resends a command whose answer was lost) may have been applied, and its"
              + " write id is no longer remembered ("
              + (outcome == 7L
                  ? "more than "
                      + config.rememberedWrites()
                      + " writes went through the fence since this call began: it began after"
                      + " write number "
                      + reply.get(1)
                      + ", and the oldest id remembered is that of write "
                      + reply.get(2)
                      + "; a larger RedisFenceConfig.rememberedWrites makes this rarer"
                  : "the fence was established again while the call was under way")
              + "). The outcome is unknown: re-read the data before writing again.",
          null);
    }
    config.metrics().fenceRejected();
    if (outcome == 0L || outcome == 3L) {
      boolean floor = outcome == 3L;
      return Either.left(
          new FenceRejection(
              lease.name(),
              lease.token(),
              lease.owner(),
              FencingToken.of(Long.parseLong((String) reply.get(1))),
              floor ? FLOOR_OWNER : (String) reply.get(2)));
    }
    if (outcome == 4L) {
      throw new FenceNotEstablishedException(
          FenceNotEstablishedException.Reason.NO_STATE,
          lease.name(),
          config.stateKey(),
          null,
          null);
    }
    if (outcome == 5L || outcome == 6L) {
      throw new FenceNotEstablishedException(
          outcome == 5L
              ? FenceNotEstablishedException.Reason.ESTABLISHED_ON_ANOTHER_SERVER
              : FenceNotEstablishedException.Reason.REPLICATION_ID_CHANGED,
          lease.name(),
          config.stateKey(),
          new FenceNotEstablishedException.ServerIdentity(
              (String) reply.get(1), (String) reply.get(3)),
          new FenceNotEstablishedException.ServerIdentity(
              (String) reply.get(2), (String) reply.get(4)));
    }
    throw new IllegalStateException("The fenced-write script answered " + reply + ": a bug.");
  }

  /**
   * Establishes the fence on the Redis server it is connected to: from now on its state counts as
   * complete on this server process and replication history ({@code run_id} and {@code
   * master_replid}), and every token at or below {@code floor} is refused for every lock. Entries
   * of locks that survived are kept; the floor only ever rises.
   *
   * <p>An operator step, never an automatic one: once before the fence is first used ({@code
   * establish(0)} on a Redis that never had this fence), and after {@link
   * FenceNotEstablishedException} with a floor at or above the highest token any holder may still
   * write with (see the README, "Re-establishing the fence"). A floor that is too low lets a stale
   * holder whose token is above it write again. Then raise each lock's token counter above the
   * floor ({@link RedisLockBackend#ensureTokensAbove}), or every new grant is refused at the floor.
   *
   * <p>Idempotent: establishing again with the same floor changes nothing.
   *
   * @param floor 0 for a fence that never had state, else the highest token that may still be in
   *     use; at most {@code Long.MAX_VALUE - 1}
   * @throws IllegalArgumentException when {@code floor} is negative or {@code Long.MAX_VALUE}, or
   *     below the floor the fence already has
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed: retry (establishing
   *     again is harmless)
   */
  public void establish(long floor) {
    if (floor < 0 || floor == Long.MAX_VALUE) {
      throw new IllegalArgumentException(
          "The floor must be between 0 and "
              + (Long.MAX_VALUE - 1)
              + ", got "
              + floor
              + ": pass 0 for a fence that never had state, else the highest token any holder may"
              + " still write with.");
    }
    List<Object> reply =
        run(
            Scripts.FENCE_ESTABLISH,
            "establish the fence at \"" + config.stateKey() + "\"",
            commandTimeout(),
            new String[] {config.stateKey()},
            Long.toString(floor),
            UUID.randomUUID().toString());
    if ((Long) reply.get(0) == 0L) {
      throw new IllegalArgumentException(
          "The fence at \""
              + config.stateKey()
              + "\" already has the floor "
              + reply.get(1)
              + ", above "
              + floor
              + ": a lower floor would accept tokens it refuses now. Pass "
              + reply.get(1)
              + " or more.");
    }
  }

  /**
   * Declares that the state that survived a Redis restart, failover or change of replication id is
   * complete, and trusts it on the server process and replication history running now; the floor
   * and every lock's entry stay as they are.
   *
   * <p>Only for an operator who knows that Redis lost nothing the fence wrote: it persisted every
   * write ({@code appendonly yes}, {@code appendfsync always}) and restarted from that file, a
   * {@code FAILOVER} waited for the replica to have everything, or ({@link
   * FenceNotEstablishedException.Reason#REPLICATION_ID_CHANGED}) the server stayed a primary all
   * along and only got its first replica or freed its backlog. After a restart without persistence,
   * a failover to a replica that may have lagged, or an {@code appendfsync everysec} crash, call
   * {@link #establish(long)} with a floor instead: the surviving copy may be behind what was
   * accepted.
   *
   * @throws IllegalStateException when there is no established state to trust: it was lost, call
   *     {@link #establish(long)}
   * @throws dev.nolock.patterns.BackendUnavailableException when Redis failed: retry
   */
  public void resumeWithSurvivingState() {
    List<Object> reply =
        run(
            Scripts.FENCE_RESUME,
            "resume the fence at \"" + config.stateKey() + "\"",
            commandTimeout(),
            new String[] {config.stateKey()},
            UUID.randomUUID().toString());
    if ((Long) reply.get(0) == 0L) {
      throw new IllegalStateException(
          "Redis has no established fence state at \""
              + config.stateKey()
              + "\" to resume with: it was never established or it was lost. Call establish(floor)"
              + " with a floor at or above the highest token any holder may still write with.");
    }
  }

  private List<Object> run(
      LuaScript script, String what, Duration timeout, String[] keys, String... args) {
    try {
      return BoundedScriptCall.run(redis, script, ScriptOutputType.MULTI, timeout, keys, args);
    } catch (RedisCommandExecutionException e) {
      if (String.valueOf(e.getMessage()).startsWith("NOLOCK_NO_SERVER_ID")) {
        throw new IllegalStateException(
            "Redis refused to "
                + what
                + ": its INFO shows no run_id (server) or no master_replid (replication)."
                + " RedisFence needs both to tell a restarted, promoted or resynced server from the"
                + " one it was established on; use a Redis that shows them (4.0 or later, INFO not"
                + " renamed).",
            e);
      }
      throw RedisFailures.translate(e, what);
    } catch (RedisException e) {
      throw RedisFailures.translate(e, what);
    }
  }

  /** How long one call waits for Redis: the connection's command timeout, read at each call. */
  private Duration commandTimeout() {
    return BoundedScriptCall.commandTimeout(
        connection, "RedisFence must bound how long a lost answer can be resent");
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
              + "\": writing it could overwrite the fence. Keep data keys outside that prefix.");
    }
    for (String prefix :
        List.of(RedisLockBackendConfig.DEFAULT_KEY_PREFIX, config.lockKeyPrefix())) {
      String lockKeys = RedisKeyNames.lockKeySpace(prefix);
      if (key.startsWith(lockKeys)) {
        throw new IllegalArgumentException(
            "The data key \""
                + key
                + "\" is in the Redis lock backend's key space (keys starting with \""
                + lockKeys
                + "\"): writing it could overwrite a lock's lease or reset its token counter, and"
                + " the backend would hand out fencing tokens it already issued. Store the data"
                + " under a key that does not start with \""
                + lockKeys
                + "\".");
      }
    }
    return key;
  }

  @Override
  public String toString() {
    return "RedisFence[" + config.stateKey() + "]";
  }
}
