package dev.nolock.patterns;

import java.util.Objects;

/**
 * A value together with the version it is stored at; pass the version back to {@link
 * VersionedStore#compareAndSet} to prove the write is based on it.
 *
 * @param value the stored value
 * @param version its version
 */
public record Versioned<T>(T value, Version version) {

  public Versioned {
    Objects.requireNonNull(value, "value");
    Objects.requireNonNull(version, "version");
  }
}
