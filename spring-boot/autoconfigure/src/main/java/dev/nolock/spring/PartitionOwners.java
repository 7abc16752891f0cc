package dev.nolock.spring;

import dev.nolock.ownership.PartitionOwner;
import java.util.Set;

/** The partition owners the starter runs, one per {@code nolock.ownership.owners.<name>}. */
public interface PartitionOwners {

  /** The declared owners' names. */
  Set<String> names();

  /**
   * The running owner of that name: its owned partitions with their epochs, whether it runs, and
   * why it stopped.
   *
   * @throws IllegalArgumentException when no such owner is declared
   */
  PartitionOwner<?, ?> owner(String name);
}
