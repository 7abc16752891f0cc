package dev.nolock.lock.kubernetes;

import java.time.Duration;
import java.util.Objects;

/**
 * A Lease as one {@link KubernetesLeaseLockBackend} instance sees it, from {@link
 * KubernetesLeaseLockBackend#inspect}: what the Lease stores, and how long <em>this instance</em>
 * must still see it unchanged before it may take it over.
 *
 * <p>"Expired" is always the judgement of one observer on its own monotonic clock: it has seen the
 * same {@code resourceVersion} for at least the Lease's {@code leaseDurationSeconds} (or wrote that
 * version itself at least that long ago). The Lease's {@code renewTime} is never compared with any
 * clock.
 *
 * @param holder the stored {@code holderIdentity}; empty when nobody holds the Lease
 * @param leaseTransitions the stored {@code leaseTransitions}: the token of the latest grant, 0 for
 *     a Lease never granted by this backend
 * @param resourceVersion the object's {@code resourceVersion}: changes with every write
 * @param leaseDuration the stored {@code leaseDurationSeconds}; zero when absent
 * @param waitLeft how much longer this instance must see this {@code resourceVersion} unchanged
 *     before it may take the Lease over; zero when it may now (and for a free Lease)
 */
public record ObservedLease(
    String holder,
    long leaseTransitions,
    String resourceVersion,
    Duration leaseDuration,
    Duration waitLeft) {

  public ObservedLease {
    Objects.requireNonNull(holder, "holder");
    Objects.requireNonNull(resourceVersion, "resourceVersion");
    Objects.requireNonNull(leaseDuration, "leaseDuration");
    Objects.requireNonNull(waitLeft, "waitLeft");
  }

  /** True when nobody holds the Lease (released, or never held): anyone may take it at once. */
  public boolean isFree() {
    return holder.isEmpty();
  }

  /**
   * True when this instance's next {@code tryAcquire} may take the Lease (if it does not change
   * meanwhile): it is free, or this instance has watched it unchanged for the full stored duration.
   */
  public boolean isExpired() {
    return isFree() || waitLeft.isZero();
  }
}
