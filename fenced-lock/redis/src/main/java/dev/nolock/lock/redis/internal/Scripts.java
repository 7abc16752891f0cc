package dev.nolock.lock.redis.internal;

/**
 * The Lua scripts of the Redis lock and fence. Each runs atomically on one Redis instance: no other
 * command runs between its reads and its writes.
 *
 * <p>Tokens travel as decimal strings, never as Lua numbers: Lua 5.1 numbers are doubles, which
 * print {@code 1e+14} in exponent form and lose precision above 2^53. Decimal strings without
 * leading zeros compare by length first, then character by character.
 */
public final class Scripts {

  private Scripts() {}

  /**
   * Grants the lease and bumps the token in one step. KEYS: lease, counter. ARGV: owner, TTL in
   * milliseconds. Returns the new token as a string, or nil when a lease is stored.
   */
  public static final LuaScript ACQUIRE =
      new LuaScript(
          "acquire",
          """
          -- nolock fenced lock: acquire
          if redis.call('EXISTS', KEYS[1]) == 1 then
            return false
          end
          redis.call('INCR', KEYS[2])
          -- Read the counter back as a string: INCR's reply is a Lua number (a double).
          local token = redis.call('GET', KEYS[2])
          redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
          return token
          """);

  /**
   * Compare-and-extend. KEYS: lease. ARGV: {@code owner|token}, TTL in milliseconds. Returns 1 when
   * extended, 0 when the lease is gone or another holder's.
   */
  public static final LuaScript RENEW =
      new LuaScript(
          "renew",
          """
          -- nolock fenced lock: renew
          if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('PEXPIRE', KEYS[1], ARGV[2])
          end
          return 0
          """);

  /**
   * Compare-and-delete. KEYS: lease. ARGV: {@code owner|token}. Returns 1 when deleted, 0 when the
   * lease is gone or another holder's.
   */
  public static final LuaScript RELEASE =
      new LuaScript(
          "release",
          """
          -- nolock fenced lock: release
          if redis.call('GET', KEYS[1]) == ARGV[1] then
            return redis.call('DEL', KEYS[1])
          end
          return 0
          """);

  /**
   * Raises the token counter to a floor. KEYS: counter. ARGV: floor (decimal). Returns the counter
   * afterwards, as a string; the next grant gets a higher token.
   */
  public static final LuaScript ENSURE_TOKENS_ABOVE =
      new LuaScript(
          "ensure-tokens-above",
          """
          -- nolock fenced lock: ensure tokens above
          local current = redis.call('GET', KEYS[1]) or '0'
          local floor = ARGV[1]
          if #current < #floor or (#current == #floor and current < floor) then
            redis.call('SET', KEYS[1], floor)
            return floor
          end
          return current
          """);

  /**
   * The fence for Redis keys. KEYS: the lock's fence hash, then the data keys. ARGV: token, owner,
   * then one value per data key. Writes every value and records {@code (token, owner)} in the fence
   * hash when the fence is absent, holds a lower token, or holds the same token from the same
   * owner; then returns {@code {1}}. Otherwise writes nothing and returns {@code {0, token, owner}}
   * as stored.
   */
  public static final LuaScript FENCED_WRITE =
      new LuaScript(
          "fenced-write",
          """
          -- nolock fence: write
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
          """);
}
