package dev.nolock.lock.etcd;

import java.time.Duration;

/** Immutable settings of an {@link EtcdLockBackend}; build with {@link #custom()}. */
public final class EtcdLockConfig {

  public static final String DEFAULT_KEY_PREFIX = "/nolock/lock/";
  public static final Duration DEFAULT_RPC_TIMEOUT = Duration.ofSeconds(5);

  private final String keyPrefix;
  private final Duration rpcTimeout;

  private EtcdLockConfig(Builder b) {
    this.keyPrefix = b.keyPrefix;
    this.rpcTimeout = b.rpcTimeout;
  }

  public static EtcdLockConfig ofDefaults() {
    return custom().build();
  }

  public static Builder custom() {
    return new Builder();
  }

  /** Prefix of every lock key; lock names follow it. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /** How long one etcd call may take before it counts as a failure. */
  public Duration rpcTimeout() {
    return rpcTimeout;
  }

  @Override
  public String toString() {
    return "EtcdLockConfig[keyPrefix=" + keyPrefix + ", rpcTimeout=" + rpcTimeout + "]";
  }

  /** Builds an {@link EtcdLockConfig}; each setter validates at once. */
  public static final class Builder {
    private String keyPrefix = DEFAULT_KEY_PREFIX;
    private Duration rpcTimeout = DEFAULT_RPC_TIMEOUT;

    private Builder() {}

    /** A non-empty prefix without whitespace, e.g. {@code "/app/locks/"}. */
    public Builder keyPrefix(String keyPrefix) {
      present(keyPrefix, "keyPrefix");
      if (keyPrefix.isEmpty()
          || keyPrefix.length() > 200
          || keyPrefix.chars().anyMatch(Character::isWhitespace)) {
        throw new IllegalArgumentException(
            "The etcd key prefix must be 1 to 200 characters without whitespace, got \""
                + keyPrefix
                + "\", e.g. \"/app/locks/\".");
      }
      this.keyPrefix = keyPrefix;
      return this;
    }

    /** Between 100 ms and 1 minute; keep it well below the lease TTLs you use. */
    public Builder rpcTimeout(Duration rpcTimeout) {
      present(rpcTimeout, "rpcTimeout");
      if (rpcTimeout.compareTo(Duration.ofMillis(100)) < 0
          || rpcTimeout.compareTo(Duration.ofMinutes(1)) > 0) {
        throw new IllegalArgumentException(
            "rpcTimeout must be between 100 ms and 1 minute, got " + rpcTimeout);
      }
      this.rpcTimeout = rpcTimeout;
      return this;
    }

    public EtcdLockConfig build() {
      return new EtcdLockConfig(this);
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
