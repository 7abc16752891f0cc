package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * Immutable settings of a {@link RedisFence}, built with {@link #custom()}; each setter validates
 * at once.
 *
 * <p>The fence keeps its whole state in one hash, {@link #stateKey()} ({@code nolock:fence:state}
 * with the default prefix): where it was established ({@code established:run_id}, {@code
 * established:replid}, {@code established:floor}, {@code established:id}), one field per lock
 * ({@code lock:<name>} = {@code <token>|<owner>}, the newest write accepted) and the ids of the
 * last {@link #rememberedWrites()} applied writes. One key, so that Redis can only lose all of it
 * at once, which the fence detects. It has no TTL and is never deleted by nolock.
 *
 * <p>Data keys may not lie in the fence's own key space (they start with {@link #keyPrefix()}) nor
 * in a {@link RedisLockBackend}'s: every key that backend writes starts with its key prefix and the
 * <code>{</code> of the lock name's hash tag ({@code nolock:lock:{orders}:token}). Writing there
 * through the fence could reset a lock's token counter, and the backend would hand out tokens again
 * that it already issued. The default lock prefix {@value
 * RedisLockBackendConfig#DEFAULT_KEY_PREFIX} is always refused; a backend configured with another
 * prefix is named with {@link Builder#lockKeyPrefix(String)}.
 */
public final class RedisFenceConfig {

  /** The key prefix used when none is configured. */
  public static final String DEFAULT_KEY_PREFIX = "nolock:fence:";

  /** How many write ids are remembered when nothing else is configured. */
  public static final int DEFAULT_REMEMBERED_WRITES = 10_000;

  /** The most write ids a fence may be configured to remember. */
  public static final int MAX_REMEMBERED_WRITES = 1_000_000;

  private static final RedisFenceConfig DEFAULTS = custom().build();

  private final String keyPrefix;
  private final String lockKeyPrefix;
  private final int rememberedWrites;
  private final CoordinationMetrics metrics;

  private RedisFenceConfig(Builder builder) {
    this.keyPrefix = builder.keyPrefix;
    this.lockKeyPrefix = builder.lockKeyPrefix;
    this.rememberedWrites = builder.rememberedWrites;
    this.metrics = builder.metrics;
  }

  /**
   * Every default: the key prefix {@value #DEFAULT_KEY_PREFIX}, the lock backend's default key
   * prefix {@value RedisLockBackendConfig#DEFAULT_KEY_PREFIX}, {@value #DEFAULT_REMEMBERED_WRITES}
   * remembered writes, no metrics.
   */
  public static RedisFenceConfig ofDefaults() {
    return DEFAULTS;
  }

  /** A builder that starts from the defaults. */
  public static Builder custom() {
    return new Builder();
  }

  /** The prefix of the fence's key; data keys may not start with it. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /**
   * The key prefix of the {@link RedisLockBackend} whose lock keys data keys may not fall among
   * (default {@value RedisLockBackendConfig#DEFAULT_KEY_PREFIX}); the default prefix's lock keys
   * are refused as well.
   */
  public String lockKeyPrefix() {
    return lockKeyPrefix;
  }

  /**
   * How many of the latest applied writes (through this fence prefix, every lock together) have
   * their write id remembered. A send of a write whose answer was lost, which Lettuce sends again,
   * is recognised while its id is remembered; after that it is answered "unknown", never refused
   * and never applied twice.
   */
  public int rememberedWrites() {
    return rememberedWrites;
  }

  /** Where rejections are counted. */
  public CoordinationMetrics metrics() {
    return metrics;
  }

  /** The hash that holds the fence's state: the prefix, then {@code state}. */
  public String stateKey() {
    return keyPrefix + "state";
  }

  @Override
  public String toString() {
    return "RedisFenceConfig[keyPrefix="
        + keyPrefix
        + ", lockKeyPrefix="
        + lockKeyPrefix
        + ", rememberedWrites="
        + rememberedWrites
        + "]";
  }

  /** Builds a {@link RedisFenceConfig}. */
  public static final class Builder {
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private String lockKeyPrefix = RedisLockBackendConfig.DEFAULT_KEY_PREFIX;
    private int rememberedWrites = DEFAULT_REMEMBERED_WRITES;
    private CoordinationMetrics metrics = CoordinationMetrics.noop();

    private Builder() {}

    /**
     * The prefix of the fence's key (default {@value RedisFenceConfig#DEFAULT_KEY_PREFIX}): 1 to
     * 128 printable characters without whitespace, <code>{</code> or <code>}</code>. Fences with
     * different prefixes are independent: each is established on its own.
     */
    public Builder keyPrefix(String keyPrefix) {
      this.keyPrefix = RedisKeyNames.requirePrefix("fence key prefix", keyPrefix);
      return this;
    }

    /**
     * The key prefix of the {@link RedisLockBackend} that grants the leases this fence checks
     * ({@link RedisLockBackendConfig#keyPrefix()}; default {@value
     * RedisLockBackendConfig#DEFAULT_KEY_PREFIX}). A data key in that backend's key space (the
     * prefix followed by <code>{</code>) is refused, so that no fenced write can overwrite a lock's
     * lease or token counter; those of the default prefix are refused whatever is set here. Set it
     * whenever the backend has a prefix of its own.
     */
    public Builder lockKeyPrefix(String lockKeyPrefix) {
      this.lockKeyPrefix = RedisKeyNames.requirePrefix("lock key prefix", lockKeyPrefix);
      return this;
    }

    /**
     * How many of the latest writes keep their write id (default {@value
     * RedisFenceConfig#DEFAULT_REMEMBERED_WRITES}, 1 to {@value
     * RedisFenceConfig#MAX_REMEMBERED_WRITES}). A write whose answer was lost is recognised when
     * Lettuce resends it, as long as fewer writes than this went through the fence in between;
     * otherwise the resend is reported unknown. Size it above your peak rate of fenced writes times
     * the longest time a resend can take (a reconnect, at most the command timeout). Each
     * remembered id costs about 240 bytes of the state hash; every fence using the same prefix
     * should use the same number (the smallest one decides).
     */
    public Builder rememberedWrites(int rememberedWrites) {
      if (rememberedWrites < 1 || rememberedWrites > MAX_REMEMBERED_WRITES) {
        throw new IllegalArgumentException(
            "rememberedWrites must be between 1 and "
                + MAX_REMEMBERED_WRITES
                + ", got "
                + rememberedWrites
                + ": pass how many of the latest fenced writes must stay recognisable when resent"
                + " (default "
                + DEFAULT_REMEMBERED_WRITES
                + ").");
      }
      this.rememberedWrites = rememberedWrites;
      return this;
    }

    /**
     * Counts rejections ({@code nolock.fence.rejections}) in {@code registry}, tagged {@code
     * component="fence"} and {@code name=instanceName} (one configured name per fence, never a
     * per-write key, at most {@value CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters);
     * default: nowhere.
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      this.metrics = CoordinationMetrics.of(registry, "fence", instanceName);
      return this;
    }

    public RedisFenceConfig build() {
      return new RedisFenceConfig(this);
    }
  }
}
