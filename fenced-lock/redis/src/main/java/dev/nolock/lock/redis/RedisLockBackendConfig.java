package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.patterns.FencingToken;
import java.util.List;

/**
 * Immutable settings of a {@link RedisLockBackend}, built with {@link #custom()}; each setter
 * validates at once.
 *
 * <p>Keys of a lock named {@code orders} with the default prefix:
 *
 * <ul>
 *   <li>{@code nolock:lock:{orders}}: the lease, a string {@code owner|token} with a millisecond
 *       TTL ({@code PX});
 *   <li>{@code nolock:lock:{orders}:token}: the token counter, an integer without TTL that is never
 *       deleted;
 *   <li>{@code nolock:lock:{orders}:released:17}: the release marker of the grant with token 17,
 *       the id of the release call that freed it, kept for the connection's command timeout so a
 *       resend of that call (Lettuce's, after a lost answer) answers true.
 *   <li>{@code nolock:lock:{orders}:queue}, {@code :queue:patience} and {@code :queue:expiry}: the
 *       callers waiting for the lease, three sorted sets of waiter identities scored by their order
 *       of arrival, until when each lets newer callers go ahead, and until when its place is kept
 *       (milliseconds of the server's clock); each expires with the last place written.
 * </ul>
 *
 * Releases are published on the channel {@code nolock:lock:released} (the prefix, then {@code
 * released}), naming the waiter first in the queue.
 *
 * <p>The braces are a Redis Cluster hash tag, so every key of a lock lands in one slot. Lock names
 * are escaped inside it ({@code %} → {@code %25}, <code>{</code> → {@code %7B}, <code>}</code> →
 * {@code %7D}) so that no lock name can end the tag early or share a key with another name.
 */
public final class RedisLockBackendConfig {

  /** The key prefix used when none is configured. */
  public static final String DEFAULT_KEY_PREFIX = "nolock:lock:";

  /** What follows the lease key to make the counter key. */
  public static final String COUNTER_SUFFIX = ":token";

  /** What follows the lease key, before the token, to make a release marker key. */
  public static final String RELEASED_INFIX = ":released:";

  /** What follows the lease key to make the queue's key. */
  private static final String QUEUE_SUFFIX = ":queue";

  /** What follows the key prefix to make the release channel. */
  private static final String RELEASE_CHANNEL_SUFFIX = "released";

  private static final RedisLockBackendConfig DEFAULTS = custom().build();

  private final String keyPrefix;

  private RedisLockBackendConfig(Builder builder) {
    this.keyPrefix = builder.keyPrefix;
  }

  /** Every default: the key prefix {@value #DEFAULT_KEY_PREFIX}. */
  public static RedisLockBackendConfig ofDefaults() {
    return DEFAULTS;
  }

  /** A builder that starts from the defaults. */
  public static Builder custom() {
    return new Builder();
  }

  /** The prefix of every key this backend writes. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /**
   * The lease key of {@code lockName}: the prefix, then the escaped name as a hash tag, e.g. {@code
   * nolock:lock:{orders}}.
   *
   * @throws IllegalArgumentException for a blank, overlong or control-character name
   */
  public String leaseKey(String lockName) {
    return keyPrefix + RedisKeyNames.hashTag(lockName);
  }

  /**
   * The token counter key of {@code lockName}, in the same slot as its lease key, e.g. {@code
   * nolock:lock:{orders}:token}.
   */
  public String counterKey(String lockName) {
    return leaseKey(lockName) + COUNTER_SUFFIX;
  }

  /**
   * The release marker key of the grant of {@code lockName} with {@code token}, in the same slot as
   * its lease key, e.g. {@code nolock:lock:{orders}:released:17}.
   */
  public String releaseMarkerKey(String lockName, FencingToken token) {
    return leaseKey(lockName) + RELEASED_INFIX + present(token, "token").value();
  }

  /**
   * The three keys of the queue of callers waiting for {@code lockName}, in the same slot as its
   * lease key: {@code nolock:lock:{orders}:queue}, {@code ...:queue:patience}, {@code
   * ...:queue:expiry}.
   */
  public List<String> queueKeys(String lockName) {
    String queue = leaseKey(lockName) + QUEUE_SUFFIX;
    return List.of(queue, queue + ":patience", queue + ":expiry");
  }

  /**
   * The Pub/Sub channel on which releases wake waiters, e.g. {@code nolock:lock:released}: one per
   * prefix, its messages the identity of the waiter to wake.
   */
  public String releaseChannel() {
    return keyPrefix + RELEASE_CHANNEL_SUFFIX;
  }

  @Override
  public String toString() {
    return "RedisLockBackendConfig[keyPrefix=" + keyPrefix + "]";
  }

  /** Builds a {@link RedisLockBackendConfig}. */
  public static final class Builder {
    private String keyPrefix = DEFAULT_KEY_PREFIX;

    private Builder() {}

    /**
     * The prefix of every key (default {@value RedisLockBackendConfig#DEFAULT_KEY_PREFIX}): 1 to
     * 128 printable characters without whitespace, <code>{</code> or <code>}</code>. Give each
     * application (or each test) its own, ending in {@code ':'}.
     */
    public Builder keyPrefix(String keyPrefix) {
      this.keyPrefix = RedisKeyNames.requirePrefix("lock key prefix", keyPrefix);
      return this;
    }

    public RedisLockBackendConfig build() {
      return new RedisLockBackendConfig(this);
    }
  }

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming the setting: a configuration error
   * is the caller's to fix, never a {@link NullPointerException}.
   */
  private static <V> V present(V value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass a value, or leave the setting out to keep its default.");
    }
    return value;
  }
}
