package dev.nolock.patterns;

import java.util.Objects;

/**
 * The version a {@link VersionedStore} holds a value at: opaque, compared only for equality. A
 * PostgreSQL version column gives a number ({@link #of(long)}); a DynamoDB record version number
 * (rvn) is a random UUID written with every change, so no clock or counter is compared between
 * machines.
 *
 * @param value the version as the store writes it
 */
public record Version(String value) {

  public Version {
    Objects.requireNonNull(value, "value");
    if (value.isEmpty() || value.length() > 64) {
      throw new IllegalArgumentException(
          "A version is 1 to 64 characters, got \""
              + value
              + "\": pass the version returned by"
              + " read(), insert() or compareAndSet().");
    }
  }

  /** A numeric version (a version column). */
  public static Version of(long value) {
    return new Version(Long.toString(value));
  }

  /** The numeric value of a version made by {@link #of(long)}. */
  public long asLong() {
    try {
      return Long.parseLong(value);
    } catch (NumberFormatException e) {
      throw new IllegalStateException("Version \"" + value + "\" is not numeric", e);
    }
  }

  @Override
  public String toString() {
    return value;
  }
}
