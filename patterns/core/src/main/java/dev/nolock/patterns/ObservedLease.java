package dev.nolock.patterns;

import io.vavr.control.Option;
import java.time.Duration;
import java.util.Objects;

/**
 * A lease as one observer saw it in one read: who holds it, the store's change marker, and how much
 * longer <em>this observer</em> must wait before it may take it over. The one snapshot of a lease
 * in nolock: a backend's {@code inspect(name)} returns it, and testkit's contract suites peek at a
 * backend's stored state as one. Its {@link #holder} is a {@link LeaseHolder}, the identity part
 * ({@code owner}, {@code token}) that {@link LockBackend#holder} reports on its own.
 *
 * <p>Like every snapshot it can be stale by the time it is read: it is for observers (a dashboard,
 * a test, an elector's {@code onNewLeader}), and it never decides whether a write may go out; the
 * fence does.
 *
 * <p>Expiry is the judgement of one observer, never a fact stored with the lease:
 *
 * <ol>
 *   <li>A backend whose server keeps the lease's end (PostgreSQL, Redis, etcd, the in-memory
 *       reference) judges it on the server's clock: {@link #waitLeft} is how long the server still
 *       keeps it, as read.
 *   <li>A backend whose store keeps no end (DynamoDB, a Kubernetes {@code Lease}) judges it on the
 *       observer's own monotonic clock: the lease is expired once this observer has seen the same
 *       {@link #version} for at least the stored {@link #leaseDuration} (or wrote that version
 *       itself at least that long ago). A stored wall-clock time (a Lease's {@code renewTime}) is
 *       never compared with any clock, so two observers may disagree, and each is right for its own
 *       next {@code tryAcquire}.
 * </ol>
 *
 * @param holder who holds the lease and under which token; empty when it is free (released, or
 *     never held), and then anyone may take it at once. An expired lease still names its last
 *     holder.
 * @param version the store's change marker, which changes with every grant, renewal and release
 *     (DynamoDB's rvn, a Lease's {@code resourceVersion}, an etcd key's mod revision); empty where
 *     the store keeps none. Compare two versions of one lease for equality only.
 * @param leaseDuration how long the holder's last write holds the lease for, as stored with it
 *     (what an observer on its own clock waits out); empty where the store keeps only an end time
 * @param waitLeft how much longer this observer must wait before its {@code tryAcquire} may take
 *     the lease over (for a backend of the second kind: see it unchanged); zero when it may now,
 *     and always zero for a free lease
 */
public record ObservedLease(
    Option<LeaseHolder> holder,
    Option<String> version,
    Option<Duration> leaseDuration,
    Duration waitLeft) {

  public ObservedLease {
    Objects.requireNonNull(holder, "holder");
    Objects.requireNonNull(version, "version");
    Objects.requireNonNull(leaseDuration, "leaseDuration");
    Objects.requireNonNull(waitLeft, "waitLeft");
    if (waitLeft.isNegative()) {
      throw new IllegalArgumentException(
          "waitLeft is " + waitLeft + ": pass zero for a lease that may be taken over now.");
    }
    if (holder.isEmpty() && !waitLeft.isZero()) {
      throw new IllegalArgumentException(
          "A free lease (no holder) has nothing to wait for, got waitLeft "
              + waitLeft
              + ": pass zero, or the holder that the wait is for.");
    }
  }

  /** True when nobody holds the lease (released, or never held): anyone may take it at once. */
  public boolean isFree() {
    return holder.isEmpty();
  }

  /**
   * True when this observer's next {@code tryAcquire} may take the lease (if it does not change
   * meanwhile): it is free, or {@link #waitLeft} is zero.
   */
  public boolean isExpired() {
    return isFree() || waitLeft.isZero();
  }

  /**
   * The holder while the lease is unexpired for this observer, else empty: what {@link
   * LockBackend#holder} reports from the same read.
   */
  public Option<LeaseHolder> liveHolder() {
    return isExpired() ? Option.none() : holder;
  }
}
