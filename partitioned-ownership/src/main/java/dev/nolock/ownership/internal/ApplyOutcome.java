package dev.nolock.ownership.internal;

/** What one apply transaction did. */
public enum ApplyOutcome {
  /** The ownership check passed, the offset advanced, the handler's change committed. */
  APPLIED,
  /** The offset had been applied before (a replay after a rebalance): nothing changed. */
  REPLAY,
  /** The ownership row carries another owner's epoch: this runner is a zombie; nothing changed. */
  FENCED
}
