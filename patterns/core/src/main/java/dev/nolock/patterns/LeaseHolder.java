package dev.nolock.patterns;

import java.util.Objects;

/**
 * Who holds a lease and under which token: the identity part of an {@link ObservedLease}, and all
 * that {@link LockBackend#holder} reports (an elector's {@code onNewLeader} reads it). A snapshot
 * for observers: it can be stale by the time it is read, so it never decides whether a write may go
 * out; the fence does.
 */
public record LeaseHolder(String owner, FencingToken token) {

  public LeaseHolder {
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
    Objects.requireNonNull(token, "token");
  }
}
