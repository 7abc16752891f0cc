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
   * milliseconds. Returns the new token as a string; the stored token when the lease is this
   * owner's already (a resend of this call after a lost answer, or the owner's own retry), whose
   * lease then lasts at least the TTL from now; nil when another owner's lease is stored.
   *
   * <p>The stored value is {@code owner|token}; the token has no {@code '|'}, the owner may, so the
   * lease is this owner's exactly when the value starts with {@code owner|} and has no {@code '|'}
   * after it.
   */
  public static final LuaScript ACQUIRE =
      new LuaScript(
          "acquire",
          """
          -- nolock fenced lock: acquire
          local held = redis.call('GET', KEYS[1])
          if held then
            local mine = ARGV[1] .. '|'
            if string.sub(held, 1, #mine) ~= mine or string.find(held, '|', #mine + 1, true) then
              return false
            end
            -- This owner's grant asked again: nothing new, its own token. The caller counts the
            -- TTL from this call, so the lease must last that long from now too (never shortened).
            if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
              redis.call('PEXPIRE', KEYS[1], ARGV[2])
            end
            return string.sub(held, #mine + 1)
          end
          redis.call('INCR', KEYS[2])
          -- Read the counter back as a string: INCR's reply is a Lua number (a double).
          local token = redis.call('GET', KEYS[2])
          redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
          return token
          """);

  /**
   * Compare-and-extend. KEYS: lease. ARGV: {@code owner|token}, TTL in milliseconds. Returns 1 when
   * extended, 0 when the lease is gone or another holder's. A resend after a lost answer finds the
   * same value and extends again: the true answer.
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
   * Lets a script read {@code TIME} before it writes: Redis before 5.0 allows that only in a script
   * replicated by its effects, which this call asks for (from 5.0 on that is the default; before
   * 3.2 the call does not exist, and the queue's scripts then fail, never a release).
   */
  private static final String BY_EFFECTS =
      """
      if redis.replicate_commands then
        redis.replicate_commands()
      end
      """;

  /**
   * The queue's common part, for the scripts that read or change a lock's waiters; each defines
   * {@code queue}, {@code patience} and {@code expiry} (the queue's three keys, see {@link
   * #ACQUIRE_IN_TURN}) first.
   *
   * <p>Sets {@code now}, the server's clock in milliseconds, and drops every place whose expiry has
   * passed, so that what the script reads next is the live queue. Defines {@code leave(waiter)};
   * {@code live(waiter)}, which also drops a place that lost its join time or its expiry (one of
   * the keys evicted or deleted: such a place would otherwise never expire, or never be ordered);
   * and {@code wakeFirst(channel)}, which publishes the identity of the live waiter first in the
   * queue.
   */
  private static final String QUEUE_PRELUDE =
      """
      local clock = redis.call('TIME')
      local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
      local function leave(waiter)
        return redis.call('ZREM', queue, waiter) + redis.call('ZREM', patience, waiter)
          + redis.call('ZREM', expiry, waiter)
      end
      for _, gone in ipairs(redis.call('ZRANGEBYSCORE', expiry, '-inf', now)) do
        leave(gone)
      end
      local function live(waiter)
        if redis.call('ZSCORE', expiry, waiter) and redis.call('ZSCORE', queue, waiter) then
          return true
        end
        leave(waiter)
        return false
      end
      local function wakeFirst(channel)
        local first = redis.call('ZRANGE', queue, 0, 0)[1]
        while first and not live(first) do
          first = redis.call('ZRANGE', queue, 0, 0)[1]
        end
        if first then
          redis.call('PUBLISH', channel, first)
        end
      end
      """;

  /**
   * Compare-and-delete, leaving a marker of the call that deleted, and waking the first waiter.
   * KEYS: lease, the grant's release marker, then the queue's three keys (see {@link
   * #ACQUIRE_IN_TURN}). ARGV: {@code owner|token}, the call's id, the marker's TTL in milliseconds,
   * the release channel. Returns 1 when this call deleted the lease, now or in an earlier send of
   * the same call (the marker holds its id); 0 when the lease is gone or another holder's.
   *
   * <p>Without the marker, a resend after a lost answer finds the lease gone (or the next holder's)
   * and answers 0: "not released", which is false. The marker is one key per release, and expires.
   *
   * <p>When someone waits (the queue's key exists), the release publishes the identity of the
   * waiter first in the queue on the channel; when nobody does, it costs one {@code EXISTS} more.
   * That part runs under {@code pcall}: a wake-up is a hint, and once the lease is deleted nothing
   * that fails there (an ACL without the channel or the queue's commands) may turn the release into
   * an error, which the caller would have to report as unknown. A resend that finds its marker
   * publishes nothing: the first send did.
   */
  public static final LuaScript RELEASE =
      new LuaScript(
          "release",
          "-- nolock fenced lock: release\n"
              + BY_EFFECTS
              + """
              if redis.call('GET', KEYS[1]) == ARGV[1] then
                redis.call('DEL', KEYS[1])
                redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
                pcall(function()
                  local queue, patience, expiry = KEYS[3], KEYS[4], KEYS[5]
                  if redis.call('EXISTS', queue) == 0 then
                    return
                  end
              """
              + QUEUE_PRELUDE
              + """
                  wakeFirst(ARGV[4])
                end)
                return 1
              end
              if redis.call('GET', KEYS[2]) == ARGV[2] then
                return 1
              end
              return 0
              """);

  /**
   * Grants the lease in turn, or keeps the caller's place in the queue. KEYS: lease, counter, then
   * the queue's three sorted sets, members the waiters' identities: the queue (score: the order in
   * which they joined), its patience (until when each lets newer callers go ahead) and its expiry
   * (until when each place is kept), the last two in milliseconds of the server's clock. ARGV:
   * owner, TTL in milliseconds, waiter, the place's length in milliseconds, the waiter's patience
   * in milliseconds. Returns the new token as a string, or the stored one when the lease is this
   * owner's already (as {@link #ACQUIRE}); nil when the lease is held or it is not this waiter's
   * turn.
   *
   * <p>It is this waiter's turn when no other live waiter that joined before it (every other, when
   * it has no place) is out of patience. A grant removes the waiter's place; a refusal keeps it for
   * the place's length from now, joining at the back when it had none: its order is the clock, but
   * above every waiter already queued, so that a step back of the server's clock cannot put a
   * newcomer ahead of the waiters before it (and no two waiters share a place in the order). Each
   * queue key lives at least as long as the place written, so a queue that nobody asks about again
   * disappears on its own.
   */
  public static final LuaScript ACQUIRE_IN_TURN =
      new LuaScript(
          "acquire-in-turn",
          "-- nolock fenced lock: acquire in turn\n"
              + BY_EFFECTS
              + "local queue, patience, expiry = KEYS[3], KEYS[4], KEYS[5]\n"
              + QUEUE_PRELUDE
              + """
              local waiter = ARGV[3]
              local held = redis.call('GET', KEYS[1])
              if held then
                local mine = ARGV[1] .. '|'
                if string.sub(held, 1, #mine) == mine
                    and not string.find(held, '|', #mine + 1, true) then
                  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
                    redis.call('PEXPIRE', KEYS[1], ARGV[2])
                  end
                  return string.sub(held, #mine + 1)
                end
              end
              local joined = redis.call('ZSCORE', queue, waiter)
              local turn = not held
              if turn then
                for _, other in ipairs(redis.call('ZRANGEBYSCORE', patience, '-inf', now)) do
                  if other ~= waiter and live(other) then
                    if not joined
                        or tonumber(redis.call('ZSCORE', queue, other)) < tonumber(joined) then
                      turn = false
                      break
                    end
                  end
                end
              end
              if turn then
                redis.call('INCR', KEYS[2])
                local token = redis.call('GET', KEYS[2])
                redis.call('SET', KEYS[1], ARGV[1] .. '|' .. token, 'PX', ARGV[2])
                leave(waiter)
                return token
              end
              if not joined then
                local at = now
                local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
                if last and tonumber(last) >= at then
                  at = tonumber(last) + 1
                end
                redis.call('ZADD', queue, string.format('%.0f', at), waiter)
                redis.call('ZADD', patience, string.format('%.0f', now + tonumber(ARGV[5])), waiter)
              end
              redis.call('ZADD', expiry, string.format('%.0f', now + tonumber(ARGV[4])), waiter)
              for _, key in ipairs({queue, patience, expiry}) do
                if redis.call('PTTL', key) < tonumber(ARGV[4]) then
                  redis.call('PEXPIRE', key, ARGV[4])
                end
              end
              return false
              """);

  /**
   * Gives up a waiter's place and, when it had one, wakes the waiter now first (under {@code
   * pcall}, as a hint). KEYS: the queue's three keys (see {@link #ACQUIRE_IN_TURN}). ARGV: waiter,
   * the release channel. Returns 1 when a place was given up, else 0.
   */
  public static final LuaScript LEAVE_QUEUE =
      new LuaScript(
          "leave-queue",
          "-- nolock fenced lock: leave the queue\n"
              + BY_EFFECTS
              + "local queue, patience, expiry = KEYS[1], KEYS[2], KEYS[3]\n"
              + QUEUE_PRELUDE
              + """
              if leave(ARGV[1]) == 0 then
                return 0
              end
              pcall(wakeFirst, ARGV[2])
              return 1
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
   * The fence scripts' common start: {@code server} and {@code replid}, the identity of the server
   * process and of its replication history, and {@code greater(a, b)} for decimal strings.
   *
   * <p>{@code run_id} ({@code INFO server}) is new for every process, so it tells a restarted
   * server or a promoted replica from the one the fence was established on. {@code master_replid}
   * ({@code INFO replication}) tells what the {@code run_id} cannot: the same process whose data
   * set was replaced. Redis gives a server a new replication id whenever it is promoted ({@code
   * REPLICAOF NO ONE}, a failover) and takes its primary's on a full resync, so a process that was
   * a replica since the fence was established shows another one. It also changes without any loss:
   * when a primary without a replication backlog gets its first replica, and when a primary frees
   * its backlog after {@code repl-backlog-ttl} seconds without replicas; the fence then refuses
   * until an operator resumes (see the README). A script error {@code NOLOCK_NO_SERVER_ID} says the
   * server shows neither.
   */
  private static final String PRELUDE =
      """
      local function greater(a, b)
        if #a ~= #b then
          return #a > #b
        end
        return a > b
      end
      local server = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
      local replid = string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)')
      if not server or not replid then
        return redis.error_reply('NOLOCK_NO_SERVER_ID INFO shows no run_id or no master_replid')
      end
      """;

  /**
   * Reads where the fence's write sequence stands, before a fenced write is first sent. KEYS: the
   * state hash. Replies {@code applied-seq} (the sequence number of the last applied write, {@code
   * '0'} for none) and {@code established:id} ({@code ''} for none).
   *
   * <p>Why: any send of the write runs after this read, so if one was applied its sequence number
   * is above the one read here. A later send that finds neither its write id nor every id since
   * that number remembered cannot tell whether an earlier send was applied, and says so (reply
   * {@code 7} of {@link #FENCED_WRITE}).
   */
  public static final LuaScript FENCE_HORIZON =
      new LuaScript(
          "fence-horizon",
          """
          -- nolock fence: where the write sequence stands
          return {redis.call('HGET', KEYS[1], 'applied-seq') or '0',
            redis.call('HGET', KEYS[1], 'established:id') or ''}
          """);

  /**
   * The fenced write. KEYS: the fence's state hash, then the data keys. ARGV: token, owner, lock
   * name, write id, the {@code applied-seq} and {@code established:id} read by {@link
   * #FENCE_HORIZON} before the first send, how many write ids to remember, then one value per data
   * key.
   *
   * <p>Replies, first element: {@code 1} written; {@code 2} already written by an earlier send of
   * this write id (a resend after a lost answer), nothing done; {@code 7, horizon, oldest} unknown:
   * the write id is not remembered, but ids applied since the horizon were forgotten (the oldest
   * remembered is {@code oldest}), so an earlier send may have been applied; nothing done; {@code
   * 8} unknown for the same reason: the fence was established again since the horizon was read;
   * {@code 0, token, owner} refused, the lock's entry holds a newer token or the same from another
   * owner; {@code 3, floor} refused, not by the entry but because the token is at or below the
   * fence's floor; {@code 4} refused, the state was not established (never established, or Redis
   * lost it); {@code 5, established run id, current run id, established replication id, current
   * replication id} refused, the state was established on another server process (a restart or a
   * failover since); {@code 6} and the same four ids, refused, established on this process but its
   * replication id changed (it was a replica and was promoted again since, or its backlog was
   * created or freed). Only {@code 1} writes.
   *
   * <p>Remembered write ids: {@code applied-id:<id>} = its sequence number, {@code
   * applied-at:<seq>} = the id, {@code applied-seq} the last number given, {@code applied-oldest}
   * the oldest still remembered. Each applied write forgets the oldest beyond the number to
   * remember (at most two per write, so that a lowered number is reached gradually). No clock is
   * read: a clock step on the Redis host changes nothing.
   */
  public static final LuaScript FENCED_WRITE =
      new LuaScript(
          "fenced-write",
          "-- nolock fence: write\n"
              + PRELUDE
              + """
              local state = KEYS[1]
              local established = redis.call('HGET', state, 'established:run_id')
              if not established then
                return {4}
              end
              if redis.call('HEXISTS', state, 'applied-id:' .. ARGV[4]) == 1 then
                return {2}
              end
              -- Not remembered. A send of this write can only have been applied after the horizon;
              -- if ids of that span were forgotten, neither a refusal nor a write would be true.
              if (redis.call('HGET', state, 'established:id') or '') ~= ARGV[6] then
                return {8}
              end
              local oldest = tonumber(redis.call('HGET', state, 'applied-oldest') or '1')
              if oldest > tonumber(ARGV[5]) + 1 then
                return {7, ARGV[5], string.format('%.0f', oldest)}
              end
              local establishedReplid = redis.call('HGET', state, 'established:replid') or ''
              if established ~= server then
                return {5, established, server, establishedReplid, replid}
              end
              if establishedReplid ~= replid then
                return {6, established, server, establishedReplid, replid}
              end
              local field = 'lock:' .. ARGV[3]
              local entry = redis.call('HGET', state, field)
              if entry then
                -- token|owner: the token has no '|', the owner may.
                local bar = string.find(entry, '|', 1, true)
                local token, owner = string.sub(entry, 1, bar - 1), string.sub(entry, bar + 1)
                if greater(token, ARGV[1]) or (token == ARGV[1] and owner ~= ARGV[2]) then
                  return {0, token, owner}
                end
              end
              local floor = redis.call('HGET', state, 'established:floor') or '0'
              if not greater(ARGV[1], floor) then
                return {3, floor}
              end
              local seq = redis.call('HINCRBY', state, 'applied-seq', 1)
              local seqText = string.format('%.0f', seq)
              redis.call('HSET', state, field, ARGV[1] .. '|' .. ARGV[2],
                'applied-id:' .. ARGV[4], seqText, 'applied-at:' .. seqText, ARGV[4])
              local keep = tonumber(ARGV[7])
              for _ = 1, 2 do
                local head = tonumber(redis.call('HGET', state, 'applied-oldest') or '1')
                if seq - head < keep then
                  break
                end
                local headText = string.format('%.0f', head)
                local old = redis.call('HGET', state, 'applied-at:' .. headText)
                redis.call('HDEL', state, 'applied-at:' .. headText)
                if old then
                  redis.call('HDEL', state, 'applied-id:' .. old)
                end
                redis.call('HSET', state, 'applied-oldest', string.format('%.0f', head + 1))
              end
              for i = 2, #KEYS do
                redis.call('SET', KEYS[i], ARGV[i + 6])
              end
              return {1}
              """);

  /**
   * Establishes the fence: from now on its state is trusted on this server process and replication
   * history, and tokens at or below the floor are refused for every lock. KEYS: the state hash.
   * ARGV: floor (decimal), a new establishment id. Lock entries and remembered write ids that
   * survived are kept. The establishment id changes unless the state was already established on
   * this very process and replication history: a write whose horizon was read under another
   * establishment may come from another copy of the state, whose sequence numbers say nothing here.
   * Replies {@code 1, previous floor, previous run id or '', run id}; or {@code 0, floor} without a
   * change when the state already has a higher floor.
   */
  public static final LuaScript FENCE_ESTABLISH =
      new LuaScript(
          "fence-establish",
          "-- nolock fence: establish\n"
              + PRELUDE
              + """
              local floor = redis.call('HGET', KEYS[1], 'established:floor') or '0'
              if greater(floor, ARGV[1]) then
                return {0, floor}
              end
              local previous = redis.call('HGET', KEYS[1], 'established:run_id') or ''
              local previousReplid = redis.call('HGET', KEYS[1], 'established:replid') or ''
              if previous ~= server or previousReplid ~= replid
                  or redis.call('HEXISTS', KEYS[1], 'established:id') == 0 then
                redis.call('HSET', KEYS[1], 'established:id', ARGV[2])
              end
              redis.call('HSET', KEYS[1], 'established:run_id', server, 'established:replid', replid,
                'established:floor', ARGV[1])
              return {1, floor, previous, server}
              """);

  /**
   * Trusts the state that survived a restart, a failover or a change of replication id on the
   * server process and replication history now running. KEYS: the state hash. ARGV: a new
   * establishment id, taken unless the state is already trusted here (see {@link
   * #FENCE_ESTABLISH}). Replies {@code 1, previous run id, run id}; or {@code 0} without a change
   * when there is no established state to trust.
   */
  public static final LuaScript FENCE_RESUME =
      new LuaScript(
          "fence-resume",
          "-- nolock fence: resume with the surviving state\n"
              + PRELUDE
              + """
              local previous = redis.call('HGET', KEYS[1], 'established:run_id')
              if not previous then
                return {0}
              end
              if previous ~= server
                  or (redis.call('HGET', KEYS[1], 'established:replid') or '') ~= replid then
                redis.call('HSET', KEYS[1], 'established:id', ARGV[1])
              end
              redis.call('HSET', KEYS[1], 'established:run_id', server, 'established:replid', replid)
              return {1, previous, server}
              """);
}
