package dev.nolock.testkit;

import java.util.ArrayList;
import java.util.List;

/**
 * The census of one stateful property container ({@link LockBackendProperties}, {@link
 * VersionedStoreProperties}): a fresh {@link ActionCensus} per property run, whose required actions
 * are the faults (each operation × each {@link FaultKind}) that must fire at least {@link
 * ActionCensus#MIN_PER_FAULT_KIND} times. The container starts it from its {@code startCensus()}
 * and its actions count into it. Thread-safe.
 */
final class FaultCensus {

  private final List<String> required = new ArrayList<>();
  private volatile ActionCensus current;

  /** A census requiring every fault of {@code operations}, already started once. */
  FaultCensus(Enum<?>[] operations) {
    for (Enum<?> op : operations) {
      for (FaultKind kind : FaultKind.values()) {
        required.add(ActionCensus.fault(op.name(), kind));
      }
    }
    start();
  }

  /** Replaces the census with a fresh one for a new property run, and returns it. */
  ActionCensus start() {
    current = new ActionCensus(ActionCensus.MIN_PER_FAULT_KIND, required);
    return current;
  }

  /** The census of the current (or last) property run. */
  ActionCensus current() {
    return current;
  }

  /** Counts one run of {@code action} in the current census. */
  void ran(String action) {
    current.ran(action);
  }
}
