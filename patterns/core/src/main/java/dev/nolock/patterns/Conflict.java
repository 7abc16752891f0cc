package dev.nolock.patterns;

import io.vavr.control.Option;
import java.util.Objects;

/**
 * A versioned write refused because the store no longer holds the expected version (or, for an
 * insert, already holds one). A value, not an exception: re-read, re-apply, retry.
 *
 * @param id the key of the refused write, rendered for logs
 * @param current the version the store holds now; empty when the key does not exist
 */
public record Conflict(String id, Option<Version> current) {

  public Conflict {
    Objects.requireNonNull(id, "id");
    Objects.requireNonNull(current, "current");
  }

  /** True when the key does not exist (any more). */
  public boolean isMissing() {
    return current.isEmpty();
  }
}
