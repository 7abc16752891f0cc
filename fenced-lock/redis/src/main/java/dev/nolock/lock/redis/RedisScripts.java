package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.Scripts;

/**
 * The Lua scripts that {@link RedisLockBackend} and {@link RedisFence} run, by their exact source
 * text and SHA-1.
 *
 * <p>Published so that what runs on a Redis server can be audited, allowed or preloaded ({@code
 * SCRIPT LOAD}) by its operator, and so that a measurement of the bare protocol (the benchmarks'
 * floor) runs byte-identical scripts rather than a copy that drifts. Each script's keys and
 * arguments are described in the library's source; they are not a stable interface and may change
 * between versions, so call the backend and the fence rather than the scripts.
 *
 * <p>Each script runs atomically on one Redis instance. Immutable and thread-safe.
 */
public enum RedisScripts {
  /** Grants a lease and bumps the token counter in one step. */
  ACQUIRE(Scripts.ACQUIRE),
  /** Extends a lease if it is still the caller's. */
  RENEW(Scripts.RENEW),
  /**
   * Deletes a lease if it is still the caller's, leaving a marker of the call that deleted it, and
   * wakes the waiter first in the lock's queue.
   */
  RELEASE(Scripts.RELEASE),
  /** Grants a lease on the waiter's turn, or keeps its place in the lock's queue. */
  ACQUIRE_IN_TURN(Scripts.ACQUIRE_IN_TURN),
  /** Gives up a waiter's place in the lock's queue and wakes the waiter now first. */
  LEAVE_QUEUE(Scripts.LEAVE_QUEUE),
  /** Raises the token counter to a floor. */
  ENSURE_TOKENS_ABOVE(Scripts.ENSURE_TOKENS_ABOVE),
  /** Reads where the fence's write sequence stands, before a fenced write is first sent. */
  FENCE_HORIZON(Scripts.FENCE_HORIZON),
  /** Refuses a stale token, else records the token and applies the write. */
  FENCED_WRITE(Scripts.FENCED_WRITE),
  /** Establishes the fence's state with a token floor. */
  FENCE_ESTABLISH(Scripts.FENCE_ESTABLISH),
  /** Trusts the fence's state that survived a restart or a failover. */
  FENCE_RESUME(Scripts.FENCE_RESUME);

  private final LuaScript script;

  RedisScripts(LuaScript script) {
    this.script = script;
  }

  /** The Lua source, byte for byte what is sent with {@code EVAL}. */
  public String source() {
    return script.source();
  }

  /** The lowercase hex SHA-1 of {@link #source()}, as {@code SCRIPT LOAD} returns it. */
  public String sha() {
    return script.sha();
  }
}
