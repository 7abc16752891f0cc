package dev.nolock.lock.redis.internal;

import io.lettuce.core.RedisCommandInterruptedException;
import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.RedisException;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.async.RedisScriptingAsyncCommands;
import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

/**
 * Runs a {@link LuaScript} and waits for its answer at most a known time, then cancels it.
 *
 * <p>Why not Lettuce's synchronous API: Lettuce resends a command whose connection dropped before
 * the answer came (at-least-once delivery), as long as the command is not done. A caller that has
 * given up on a command (and told its own caller "unknown") should not have it run again later. The
 * synchronous API waits for a timeout that {@code TimeoutOptions} may change per command; here the
 * wait is exactly {@code limit}, and the command is cancelled when it ends, so Lettuce drops it
 * instead of sending it again later.
 */
public final class BoundedScriptCall {

  private BoundedScriptCall() {}

  /**
   * The {@code limit} of a call on {@code connection}: its command timeout, read at each call.
   *
   * @param mustBound what the caller bounds with it, for the message when there is none (e.g.
   *     {@code "RedisFence must bound how long a lost answer can be resent"})
   * @throws IllegalArgumentException when the connection has no positive command timeout
   */
  public static Duration commandTimeout(StatefulConnection<?, ?> connection, String mustBound) {
    Duration timeout = connection.getTimeout();
    if (timeout == null || timeout.isZero() || timeout.isNegative()) {
      throw new IllegalArgumentException(
          "The connection has no command timeout ("
              + timeout
              + "): "
              + mustBound
              + ". Set one well below your lease TTL, e.g."
              + " RedisURI.setTimeout(Duration.ofSeconds(2)).");
    }
    return timeout;
  }

  /**
   * {@code EVALSHA}, then {@code EVAL} when the server answers {@code NOSCRIPT}; the whole call,
   * fallback included, waits at most {@code limit} counted from just before the first send, so no
   * answer is accepted later than {@code limit} after the server could first have run the script
   * (what the script leaves for {@code limit}, a release marker, still stands then).
   *
   * @throws RedisCommandTimeoutException when an answer did not come within {@code limit} (the
   *     command is cancelled; whether the server ran it is unknown)
   * @throws RedisException for any other failure, as Lettuce reported it
   */
  public static <T> T run(
      RedisScriptingAsyncCommands<String, String> redis,
      LuaScript script,
      ScriptOutputType type,
      Duration limit,
      String[] keys,
      String... args) {
    long sent = System.nanoTime();
    try {
      return await(redis.evalsha(script.sha(), type, keys, args), sent, limit);
    } catch (RedisNoScriptException e) {
      return await(redis.eval(script.source(), type, keys, args), sent, limit);
    }
  }

  /**
   * Waits until {@code limit} after {@code sent}, a time taken before the command was handed to
   * Lettuce: the server cannot have run it earlier, so whatever it leaves for {@code limit} (a
   * release marker) still stands when the last answer this call accepts arrives.
   */
  private static <T> T await(RedisFuture<T> command, long sent, Duration limit) {
    try {
      long left = limit.toNanos() - (System.nanoTime() - sent);
      if (!command.await(Math.max(0, left), TimeUnit.NANOSECONDS)) {
        command.cancel(true);
        throw new RedisCommandTimeoutException("Command timed out after " + limit);
      }
      return command.get();
    } catch (InterruptedException e) {
      command.cancel(true);
      Thread.currentThread().interrupt();
      throw new RedisCommandInterruptedException(e);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RedisException redisException) {
        throw redisException;
      }
      throw new RedisException(e.getCause());
    }
  }
}
