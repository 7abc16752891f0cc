package dev.nolock.lock.redis;

import dev.nolock.lock.redis.internal.RedisKeyNames;
import dev.nolock.patterns.CoordinationMetrics;
import java.util.Objects;

/**
 * Immutable settings of a {@link RedisFence}, built with {@link #custom()}; each setter validates
 * at once.
 *
 * <p>The fence keeps its whole state in one hash, {@link #stateKey()} ({@code nolock:fence:state}
 * with the default prefix): the seed ({@code seed:run_id}, {@code seed:replid}, {@code
 * seed:floor}), one field per lock ({@code lock:<name>} = {@code <token>|<owner>}, the newest write
 * accepted) and the ids of recently applied writes. One key, so that Redis can only lose all of it
 * at once, which the fence detects. It has no TTL and is never deleted by nolock.
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

  /** The prefix of the fence's key; data keys may not start with it. */
  public String keyPrefix() {
    return keyPrefix;
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
    return "RedisFenceConfig[keyPrefix=" + keyPrefix + "]";
  }

  /** Builds a {@link RedisFenceConfig}. */
  public static final class Builder {
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private CoordinationMetrics metrics = CoordinationMetrics.noop();

    private Builder() {}

    /**
     * The prefix of the fence's key (default {@value RedisFenceConfig#DEFAULT_KEY_PREFIX}): 1 to
     * 128 printable characters without whitespace, <code>{</code> or <code>}</code>. Fences with
     * different prefixes are independent: each is seeded on its own.
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
