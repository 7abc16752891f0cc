package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.patterns.CoordinationMetrics;
import java.util.Objects;

/**
 * Immutable settings of a {@link RedisFence}, built with {@link #custom()}; each setter validates
 * at once.
 *
 * <p>The fence of a lock named {@code orders} with the default prefix is the hash {@code
 * nolock:fence:{orders}} with the fields {@code token} (the highest token accepted, decimal) and
 * {@code owner} (who wrote with it). It has no TTL and is never deleted by nolock.
 */
public final class RedisFenceConfig {

  /** The key prefix used when none is configured. */
  public static final String DEFAULT_KEY_PREFIX = "nolock:fence:";

  private static final RedisFenceConfig DEFAULTS = custom().build();

  private final String keyPrefix;
  private final CoordinationMetrics metrics;

  private RedisFenceConfig(Builder builder) {
    this.keyPrefix = builder.keyPrefix;
    this.metrics = builder.metrics;
  }

  /** Every default: the key prefix {@value #DEFAULT_KEY_PREFIX}, no metrics. */
  public static RedisFenceConfig ofDefaults() {
    return DEFAULTS;
  }

  /** A builder that starts from the defaults. */
  public static Builder custom() {
    return new Builder();
  }

  /** The prefix of every fence key; data keys may not start with it. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /** Where rejections are counted. */
  public CoordinationMetrics metrics() {
    return metrics;
  }

  /**
   * The fence key of {@code lockName}: the prefix, then the escaped name as a hash tag, e.g. {@code
   * nolock:fence:{orders}}.
   */
  public String fenceKey(String lockName) {
    return keyPrefix + RedisKeyNames.hashTag(lockName);
  }

  @Override
  public String toString() {
    return "RedisFenceConfig[keyPrefix=" + keyPrefix + "]";
  }

  /** Builds a {@link RedisFenceConfig}. */
  public static final class Builder {
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private CoordinationMetrics metrics = CoordinationMetrics.noop();

    private Builder() {}

    /**
     * The prefix of every fence key (default {@value RedisFenceConfig#DEFAULT_KEY_PREFIX}): 1 to
     * 128 printable characters without whitespace, <code>{</code> or <code>}</code>.
     */
    public Builder keyPrefix(String keyPrefix) {
      this.keyPrefix = RedisKeyNames.requirePrefix("fence key prefix", keyPrefix);
      return this;
    }

    /**
     * Where to count rejections ({@code nolock.fence.rejections}), e.g. {@code
     * CoordinationMetrics.of(registry, "fence", "orders")}; default: nowhere.
     */
    public Builder metrics(CoordinationMetrics metrics) {
      this.metrics = Objects.requireNonNull(metrics, "metrics");
      return this;
    }

    public RedisFenceConfig build() {
      return new RedisFenceConfig(this);
    }
  }
}
