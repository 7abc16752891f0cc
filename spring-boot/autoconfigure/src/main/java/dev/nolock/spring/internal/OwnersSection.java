package dev.nolock.spring.internal;

import dev.nolock.ownership.PartitionOwner;
import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.PartitionOwners;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The {@code owners} section of the {@code nolock} endpoint: per declared partition owner, whether
 * it runs, the partitions this instance owns with their owner epochs, and, when it stopped on its
 * own, the class of its failure (never the message: it can quote a record).
 */
public final class OwnersSection implements NolockSection {

  private final PartitionOwners owners;

  public OwnersSection(PartitionOwners owners) {
    this.owners = owners;
  }

  @Override
  public String name() {
    return "owners";
  }

  @Override
  public Object report() {
    List<Owner> report = new ArrayList<>();
    for (String name : owners.names()) {
      report.add(state(owners, name));
    }
    return report;
  }

  /** The state of one owner; not started (or stopped by the application) reads as not running. */
  static Owner state(PartitionOwners owners, String name) {
    PartitionOwner<?, ?> owner;
    try {
      owner = owners.owner(name);
    } catch (IllegalArgumentException notRunning) {
      return new Owner(name, false, Map.of(), null);
    }
    Map<Integer, Long> epochs = new TreeMap<>();
    for (Map.Entry<Integer, FencingToken> e : owner.ownedPartitions().entrySet()) {
      epochs.put(e.getKey(), e.getValue().value());
    }
    String failure = owner.failure().map(f -> f.getClass().getName()).getOrNull();
    return new Owner(name, owner.isRunning(), epochs, failure);
  }

  /**
   * One partition owner.
   *
   * @param name the owner's name ({@code nolock.ownership.owners.<name>})
   * @param running whether its loop runs
   * @param partitions the partitions this instance owns, each with its owner epoch
   * @param failure the class of the exception that stopped it on its own, or null
   */
  public record Owner(
      String name, boolean running, Map<Integer, Long> partitions, String failure) {}
}
