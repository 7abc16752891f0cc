package dev.nolock.lock.redis.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.Names;

/**
 * Key names for Redis: configured prefixes are validated, and lock names are put inside a Redis
 * Cluster hash tag ({@code {...}}) so that every key of one lock lands in one slot.
 *
 * <p>A lock name may contain any printable character, including {@code {} and {@code }}, which
 * would end the hash tag early. Names are therefore escaped the way URLs are: {@code %} becomes
 * {@code %25}, {@code {} becomes {@code %7B} and {@code }} becomes {@code %7D}. The escape is
 * injective, so two lock names never share a key, and names without those characters read as
 * themselves ({@code orders} → {@code {orders}}).
 */
public final class RedisKeyNames {

  /** Longest key prefix accepted. */
  public static final int MAX_PREFIX_LENGTH = 128;

  private RedisKeyNames() {}

  /**
   * A configured key prefix: 1 to {@value #MAX_PREFIX_LENGTH} characters, printable, no whitespace,
   * and no {@code {} or {@code }} (the prefix would otherwise become the hash tag of every lock).
   *
   * @param what what the prefix is for, for the message ("lock key prefix")
   */
  public static String requirePrefix(String what, String prefix) {
    Names.requireName(what, prefix, MAX_PREFIX_LENGTH);
    for (int i = 0; i < prefix.length(); i++) {
      char c = prefix.charAt(i);
      if (c == '{' || c == '}') {
        throw new IllegalArgumentException(
            "The "
                + what
                + " \""
                + prefix
                + "\" contains '"
                + c
                + "' at index "
                + i
                + ": Redis"
                + " Cluster would hash every lock by that part and put all of them in one slot."
                + " nolock adds the hash tag itself; use a prefix like \"nolock:lock:\".");
      }
      if (Character.isWhitespace(c)) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " \""
                + prefix
                + "\" contains whitespace at index "
                + i
                + ": use a"
                + " prefix like \"nolock:lock:\".");
      }
    }
    return prefix;
  }

  /**
   * What every key a lock backend with {@code prefix} writes starts with: the prefix, then the
   * opening brace of the lock name's hash tag.
   */
  public static String lockKeySpace(String prefix) {
    return prefix + '{';
  }

  /** The hash tag of a lock name: {@code {} + the escaped name + {@code }}. */
  public static String hashTag(String lockName) {
    Names.requireName("lock name", lockName, Lease.MAX_NAME_LENGTH);
    StringBuilder tag = new StringBuilder(lockName.length() + 8).append('{');
    for (int i = 0; i < lockName.length(); i++) {
      char c = lockName.charAt(i);
      switch (c) {
        case '%' -> tag.append("%25");
        case '{' -> tag.append("%7B");
        case '}' -> tag.append("%7D");
        default -> tag.append(c);
      }
    }
    return tag.append('}').toString();
  }
}
