package dev.nolock.lock;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.LeaseClock;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;

/**
 * Clock-free lease expiry for a {@link dev.nolock.patterns.LockBackend} whose store keeps no expiry
 * of its own: a contender decides that a held lease has ended by watching its <em>version</em> (a
 * record version number, a {@code resourceVersion}: anything that changes with every write of the
 * lease) stay unchanged for the lease duration stored with it, measured on the contender's own
 * monotonic {@link LeaseClock}. No timestamp of another machine is ever compared with a local
 * clock. The DynamoDB and the Kubernetes lock backends are built on it; a backend keeps one
 * instance for as long as it lives.
 *
 * <p>Guarantee: {@link #observe} reports a lease as taken-over-able only after this instance has
 * seen the same version for at least the stored duration, counted from when a read that already
 * showed that version <em>returned</em>; or, for a version this instance wrote itself, once that
 * grant's own holder deadline (counted from before its write was sent) has passed. A holder counts
 * its lease from before its write was sent, so its deadline ends before any contender's: the only
 * assumption is that the two monotonic clocks run at about the same <em>rate</em> over one lease
 * duration. A contender's first read never finds a held lease expired, however long ago it died:
 * someone must watch it die.
 *
 * <p>Algorithm, for one lock name:
 *
 * <ol>
 *   <li>Read the lease from the store; read {@link LeaseClock#nanoTime()} after the read returned.
 *   <li>Free (never held, or released): take it with a conditional write; no watching is needed.
 *   <li>Held: call {@link #observe} with the version, the stored duration and that reading. If this
 *       instance already watches the same version, the earlier watch is kept (a re-read never
 *       postpones a takeover); a different version (a heartbeat, a new holder, anyone's write)
 *       starts a new watch from this read.
 *   <li>The watch's deadline has not passed: do not take the lease (report its {@link
 *       Deadline#remaining()} as the wait left). It has passed: take it with a conditional write on
 *       the observed version, which fails if the lease changed since the read.
 *   <li>After each write of this instance that grants or renews a lease, call {@link #wrote} with
 *       the new version and the grant's holder deadline; after a release, call {@link #forget}.
 * </ol>
 *
 * <p>Memory: one entry per lock name seen held; once there are more than {@value #PRUNE_ABOVE},
 * entries whose deadline has passed are dropped (a dropped entry only makes the next contender
 * watch again from the start). Thread-safe.
 */
public final class ObservedLeases {

  /** Above this many names, watches whose deadline has passed are dropped. */
  public static final int PRUNE_ABOVE = 10_000;

  private record Observation(String version, Deadline takeoverAt) {}

  private final LeaseClock clock;
  private final ConcurrentMap<String, Observation> observations = new ConcurrentHashMap<>();

  /** Watches measured on {@code clock}, the backend's own monotonic clock. */
  public ObservedLeases(LeaseClock clock) {
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  /**
   * Records that a read of the lease {@code name}, which returned at {@code returnedAtNanos},
   * showed it held at {@code version} with {@code storedDuration}, and answers when this instance
   * may take it over.
   *
   * @param returnedAtNanos {@code clock.nanoTime()} read <em>after</em> the read returned
   * @param storedDuration the duration the holder stored with {@code version}, not this instance's
   *     own setting
   * @return the takeover deadline: the earliest watch of this very version, or a new one counted
   *     from {@code returnedAtNanos}; the lease may be taken over on {@code version} once it {@link
   *     Deadline#hasExpired()}
   * @throws IllegalArgumentException when {@code storedDuration} is not a lease duration {@link
   *     Deadline} accepts
   */
  public Deadline observe(
      String name, String version, Duration storedDuration, long returnedAtNanos) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(version, "version");
    Objects.requireNonNull(storedDuration, "storedDuration");
    if (observations.size() > PRUNE_ABOVE) {
      observations.values().removeIf(o -> o.takeoverAt().hasExpired());
    }
    return observations
        .compute(
            name,
            (n, before) ->
                before != null && before.version().equals(version)
                    ? before
                    : new Observation(
                        version, Deadline.forContender(clock, returnedAtNanos, storedDuration)))
        .takeoverAt();
  }

  /**
   * Records that this instance wrote {@code version} of the lease {@code name} (a grant or a
   * renewal) whose holder deadline is {@code holderDeadline}: another caller of this instance may
   * take it over once that deadline has passed, without watching it for a further full duration.
   */
  public void wrote(String name, String version, Deadline holderDeadline) {
    observations.put(
        Objects.requireNonNull(name, "name"),
        new Observation(
            Objects.requireNonNull(version, "version"),
            Objects.requireNonNull(holderDeadline, "holderDeadline")));
  }

  /** Drops the watch of {@code name}: its lease was released, so the next contender takes it. */
  public void forget(String name) {
    observations.remove(name);
  }

  /** How many lock names are watched. */
  public int size() {
    return observations.size();
  }
}
