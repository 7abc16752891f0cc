package dev.nolock.lock;

import dev.nolock.patterns.Deadline;

/**
 * What {@link HeldLock#release()} or {@link HeldLock#releaseNoEarlierThan} did. A release never
 * throws for the backend: finished work must not look failed to a caller that would then retry it.
 * A second release of the same grant returns the first one's outcome.
 */
public sealed interface ReleaseOutcome {

  /** This call freed the lease: the next acquirer can take it at once. */
  record Released() implements ReleaseOutcome {}

  /**
   * {@link HeldLock#releaseNoEarlierThan}: the lease was set to end when asked, no watchdog renews
   * it any more, and it ends by itself then; until that moment every other acquirer is refused.
   *
   * @param until the earliest end, on this holder's clock; the backend may keep the lease a little
   *     longer (etcd and Kubernetes round up to whole seconds, and the round trip adds to it)
   */
  record KeptUntil(Deadline until) implements ReleaseOutcome {}

  /**
   * The lease had already ended before the release: it ran out, or passed to another holder. Writes
   * sent near its end may have met another holder's; a fence refuses the stale ones.
   *
   * @param cause which kind of end; {@link LostLease.Cause#TTL_REACHED} is the expected end of a
   *     lease that nobody renews
   * @param reason what happened, for logs
   */
  record Lost(LostLease.Cause cause, String reason) implements ReleaseOutcome {}

  /**
   * The backend failed or lost its answer: whether this call freed (or kept) the lease is unknown.
   * It ends at its TTL at the latest; counted in {@code nolock.release.failures}.
   *
   * @param failure what the backend threw
   */
  record Unknown(RuntimeException failure) implements ReleaseOutcome {}
}
