package dev.nolock.lock;

import dev.nolock.patterns.FencingToken;

/**
 * Passed to the lease-lost callback: which lease was lost and why. The holder must stop writing at
 * once; its next {@link HeldLock#checkPointOfNoReturn} throws.
 *
 * @param name the lock name
 * @param token the token of the lost lease
 * @param reason what happened, for logs
 */
public record LostLease(String name, FencingToken token, String reason) {}
