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
 * @param reason what happened, for logs
 */
public record LostLease(String name, String owner, FencingToken token, String reason) {}
