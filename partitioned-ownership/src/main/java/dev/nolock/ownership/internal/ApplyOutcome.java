package dev.nolock.ownership.internal;

/** What one apply transaction did. */
public enum ApplyOutcome {
  /** The ownership check passed, the offset advanced, the handler's change committed. */
  APPLIED,
  /** The offset had been applied before (a replay after a rebalance): nothing changed. */
  REPLAY,
  /** The ownership row carries another owner's epoch: this runner is a zombie; nothing changed. */
  FENCED,
  /**
   * The record failed for good, the dead-letter topic acknowledged it, and its offset was recorded
   * as applied under the ownership check; the handler's change (if any) was rolled back.
   */
  DEAD_LETTERED
}
