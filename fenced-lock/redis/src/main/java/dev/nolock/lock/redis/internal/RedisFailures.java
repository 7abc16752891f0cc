package dev.nolock.lock.redis.internal;

import dev.nolock.patterns.BackendUnavailableException;
import io.lettuce.core.RedisCommandExecutionException;
import io.lettuce.core.RedisException;

/**
 * Turns what Lettuce throws into what nolock promises: a broken or unreachable server is a {@link
 * BackendUnavailableException} (retry later); a key that holds a value of another type is an {@link
 * IllegalStateException} (misconfiguration: the key prefix collides with other data).
 */
public final class RedisFailures {

  private RedisFailures() {}

  /**
   * The exception to throw for {@code e}, raised while doing {@code what} (e.g. "acquire lock
   * \"orders\"").
   */
  public static RuntimeException translate(RedisException e, String what) {
    String message = String.valueOf(e.getMessage());
    if (e instanceof RedisCommandExecutionException && message.startsWith("WRONGTYPE")) {
      return new IllegalStateException(
          "Redis refused to "
              + what
              + ": "
              + message
              + ". A key nolock uses holds a value of"
              + " another type, so another application writes under the same key prefix."
              + " Configure a key prefix of nolock's own.",
          e);
    }
    return new BackendUnavailableException(
        "Redis failed to "
            + what
            + " ("
            + message
            + "). Whether it took effect is unknown;"
            + " retry later.",
        e);
  }
}
