package dev.nolock.testkit;

import dev.nolock.patterns.FencingToken;

/**
 * What a lock backend has stored for a name, read natively (SQL, a Redis GET) by a contract test's
 * peek hook.
 *
 * @param owner the stored holder
 * @param token the stored token
 * @param expired whether the lease has expired by the server's own clock
 */
public record PeekedLease(String owner, FencingToken token, boolean expired) {}
