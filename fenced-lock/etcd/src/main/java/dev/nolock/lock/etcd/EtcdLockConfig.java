package dev.nolock.lock.etcd;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.Names;
import java.time.Duration;

/**
 * Immutable settings of an {@link EtcdLockBackend}; build with {@link #custom()}.
 *
 * <p>The key of a lock is the prefix, then the lock name with {@code %} written {@code %25} and
 * {@code /} written {@code %2F} ({@code /nolock/lock/invoice-42}; {@code a/b} → {@code
 * /nolock/lock/a%2Fb}). The prefix ends in {@code /} and the escaped name has none, so the key's
 * last {@code /} is where the prefix ends: two applications with different prefixes never share a
 * key, also when one prefix lies inside the other ({@code /app/} and {@code /app/billing/}), and
 * two names never share one either.
 */
public final class EtcdLockConfig {

  public static final String DEFAULT_KEY_PREFIX = "/nolock/lock/";

  /** The longest key prefix accepted. */
  public static final int MAX_KEY_PREFIX_LENGTH = 200;

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

  /** Prefix of every lock key, ending in {@code /}; escaped lock names follow it. */
  public String keyPrefix() {
    return keyPrefix;
  }

  /**
   * The etcd key of {@code lockName}: the prefix, then the name with {@code %} and {@code /}
   * escaped ({@code %25}, {@code %2F}).
   *
   * @throws IllegalArgumentException for a blank, overlong or control-character name
   */
  public String lockKey(String lockName) {
    Names.requireName("lock name", lockName, Lease.MAX_NAME_LENGTH);
    StringBuilder key = new StringBuilder(keyPrefix.length() + lockName.length() + 8);
    key.append(keyPrefix);
    for (int i = 0; i < lockName.length(); i++) {
      char c = lockName.charAt(i);
      switch (c) {
        case '%' -> key.append("%25");
        case '/' -> key.append("%2F");
        default -> key.append(c);
      }
    }
    return key.toString();
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

    /**
     * The prefix of every lock key (default {@value EtcdLockConfig#DEFAULT_KEY_PREFIX}): 1 to
     * {@value EtcdLockConfig#MAX_KEY_PREFIX_LENGTH} printable characters without whitespace, ending
     * in {@code /}, e.g. {@code "/app/locks/"}. Give each application its own.
     */
    public Builder keyPrefix(String keyPrefix) {
      present(keyPrefix, "keyPrefix");
      if (keyPrefix.isEmpty()
          || keyPrefix.length() > MAX_KEY_PREFIX_LENGTH
          || keyPrefix
              .chars()
              .anyMatch(c -> Character.isWhitespace(c) || Character.isISOControl(c))) {
        throw new IllegalArgumentException(
            "The etcd key prefix must be 1 to "
                + MAX_KEY_PREFIX_LENGTH
                + " printable characters without whitespace, got \""
                + keyPrefix
                + "\": use a prefix like \"/app/locks/\".");
      }
      if (!keyPrefix.endsWith("/")) {
        throw new IllegalArgumentException(
            "The etcd key prefix \""
                + keyPrefix
                + "\" does not end in '/': a lock key is the prefix followed by the lock name, so"
                + " without the '/' two applications could share a key (prefix \"/app\" with lock"
                + " \"2x\" and prefix \"/app2\" with lock \"x\" are both \"/app2x\"). Pass \""
                + keyPrefix
                + "/\".");
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
