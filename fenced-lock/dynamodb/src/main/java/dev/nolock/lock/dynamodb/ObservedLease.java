package dev.nolock.lock.dynamodb;

import dev.nolock.patterns.FencingToken;
import java.time.Duration;
import java.util.Objects;

/**
 * A lease item as one {@link DynamoDbLockBackend} instance sees it, from {@link
 * DynamoDbLockBackend#inspect}: what the item stores, and how long <em>this instance</em> must
 * still watch it unchanged before it may take it over.
 *
 * <p>There is no server-side expiry to report: DynamoDB stores no time for the lease. "Expired" is
 * always the judgement of one observer, made on its own monotonic clock: it has seen the same rvn
 * for at least the stored lease duration (or wrote that rvn itself at least that long ago).
 *
 * @param owner the stored holder
 * @param token the token of the stored grant
 * @param rvn the record version number: changes with every grant, heartbeat and release
 * @param leaseDuration the lease duration the holder stored with the rvn
 * @param released whether the holder released it (then anyone may take it at once)
 * @param waitLeft how much longer this instance must see this rvn unchanged before it may take the
 *     lease over; zero when it may now (and for a released lease)
 */
public record ObservedLease(
    String owner,
    FencingToken token,
    String rvn,
    Duration leaseDuration,
    boolean released,
    Duration waitLeft) {

  public ObservedLease {
    Objects.requireNonNull(owner, "owner");
    Objects.requireNonNull(token, "token");
    Objects.requireNonNull(rvn, "rvn");
    Objects.requireNonNull(leaseDuration, "leaseDuration");
    Objects.requireNonNull(waitLeft, "waitLeft");
  }

  /**
   * True when this instance's next {@code tryAcquire} may take the lease (if the rvn does not
   * change meanwhile): it is released, or this instance has watched it for the full stored
   * duration.
   */
  public boolean isExpired() {
    return released || waitLeft.isZero();
  }
}
