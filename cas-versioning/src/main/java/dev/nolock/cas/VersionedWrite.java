package dev.nolock.cas;

import dev.nolock.patterns.Version;

/**
 * One row of {@link VersionColumnStore#compareAndSetAll}: write {@code newValue} under {@code id}
 * only if the row is still at {@code expected}.
 *
 * @param id the key of the row
 * @param expected the version the new value is based on, as returned by {@code read}, {@code
 *     insert} or {@code compareAndSet}
 * @param newValue the value to store
 */
public record VersionedWrite<K, T>(K id, Version expected, T newValue) {

  /**
   * @throws IllegalArgumentException when any part is null
   */
  public VersionedWrite {
    if (id == null || expected == null || newValue == null) {
      throw new IllegalArgumentException(
          "A versioned write needs an id, the expected version and a new value, got id="
              + id
              + ", expected version="
              + expected
              + ", newValue="
              + newValue
              + ".");
    }
  }

  /** The same as the constructor, for readability at call sites. */
  public static <K, T> VersionedWrite<K, T> of(K id, Version expected, T newValue) {
    return new VersionedWrite<>(id, expected, newValue);
  }
}
