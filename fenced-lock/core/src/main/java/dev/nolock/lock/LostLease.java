package dev.nolock.lock;

import dev.nolock.patterns.FencingToken;

/**
 * Passed to the lease-lost callback: which lease was lost and why. The holder must stop writing at
 * once; its next {@link HeldLock#checkPointOfNoReturn} throws.
 *
 * @param name the lock name
 * @param owner the identity of the lost grant ({@link HeldLock#owner()}): two grants of one process
 *     can carry equal tokens after a backend lost its state, never equal owners
 * @param token the token of the lost lease
 * @param cause which kind of loss: {@link Cause#TTL_REACHED} is the expected end of a lease that
 *     nobody renews, the others mean something went wrong
 * @param reason what happened, for logs
 */
public record LostLease(String name, String owner, FencingToken token, Cause cause, String reason) {

  /** Why a held lease ended before its holder released it. */
  public enum Cause {
    /**
     * The backend refused a renewal, an extension or a release: the lease had expired on the
     * server, or another holder has it now.
     */
    REFUSED,
    /**
     * Auto-renewal was on, but no renewal succeeded before the holder's deadline (the backend
     * failed or was slow, or the process paused).
     */
    RAN_OUT,
    /**
     * Auto-renewal was off and the lease lived the TTL it was acquired or last extended with while
     * its holder still held it: the expected end of an unrenewed lease, logged at INFO by the
     * default callback, not as a warning.
     */
    TTL_REACHED
  }
}
