package dev.nolock.testkit;

/**
 * A key prefix that belongs to one test class, made by {@link RedisExtension}.
 *
 * <p>Guarantees: the prefix ({@code nolock:t:} and 12 random hex digits, then {@code :}) is used by
 * no other test class, so classes that share one Redis (a developer's, CI's, parallel JVMs) never
 * touch each other's keys; after the class every key that starts with it is deleted. The rest of
 * the database is left alone: nothing is flushed.
 */
public final class RedisKeys {

  private final String prefix;

  RedisKeys(String prefix) {
    this.prefix = prefix;
  }

  /** The prefix itself, ending in {@code ':'}; a glob for it is {@code prefix() + "*"}. */
  public String prefix() {
    return prefix;
  }

  /** {@code prefix() + name}. */
  public String key(String name) {
    if (name == null || name.isEmpty()) {
      throw new IllegalArgumentException(
          "key name must not be empty; pass the part after the prefix, like \"lock:orders\"");
    }
    return prefix + name;
  }

  @Override
  public String toString() {
    return "RedisKeys[" + prefix + "]";
  }
}
