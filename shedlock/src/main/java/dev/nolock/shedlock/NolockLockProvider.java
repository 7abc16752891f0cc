package dev.nolock.shedlock;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.LockBackend;
import dev.nolock.shedlock.internal.NolockSimpleLock;
import dev.nolock.shedlock.internal.ShedLockNames;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * A ShedLock {@link ExtensibleLockProvider} over any nolock {@link LockBackend} (PostgreSQL, Redis,
 * etcd, DynamoDB, Kubernetes): {@code @SchedulerLock} methods keep working, and every grant carries
 * a strictly increasing {@link dev.nolock.patterns.FencingToken} that the locked method reads with
 * {@link SchedulerLease#current()} and sends through a fence, so that a run whose lock ran out
 * while it was paused cannot overwrite the next run's writes.
 *
 * <p>Guarantees, as ShedLock documents them for its providers:
 *
 * <ol>
 *   <li>{@link #lock} asks the backend once and never waits: empty when another holder has an
 *       unexpired lock on the name.
 *   <li>The lock ends by itself {@code lockAtMostFor} after it was asked for, counted by the
 *       backend (nothing renews it: ShedLock's contract is "at most that long").
 *   <li>{@link SimpleLock#unlock()} keeps every other caller out until {@code lockAtLeastFor} after
 *       the acquisition, by shortening the lease to the time still missing rather than by holding a
 *       thread, then it ends by itself.
 *   <li>{@link SimpleLock#extend} sets a held lock to end {@code lockAtMostFor} from now (a
 *       compare-and-swap on the grant's owner and token): it answers the new lock, or empty when
 *       the lock had already run out or passed to another holder. The grant, and so its token,
 *       stays the same.
 *   <li>An unlock (or an extension) of a lock that ran out never frees or prolongs the next
 *       holder's lock: every call is conditional on the grant's owner and token.
 * </ol>
 *
 * <p>Algorithm of {@link #lock}:
 *
 * <ol>
 *   <li>Refuse a name nolock cannot store unchanged, and a {@code lockAtMostFor} that is zero or
 *       longer than {@link LockConfig#MAX_TTL}, with an {@link IllegalArgumentException} that says
 *       how to fix the {@code @SchedulerLock}.
 *   <li>Read the monotonic clock, then {@link FencedLock#tryAcquire} the name with a TTL of {@code
 *       lockAtMostFor} on a lock without a watchdog.
 *   <li>On a grant, bind it to the calling thread (for {@link SchedulerLease}) until it is
 *       unlocked, and answer a {@link SimpleLock} whose unlock is {@link
 *       HeldLock#releaseNoEarlierThan} with the time from that first clock reading to {@code
 *       lockAtLeastFor} after the start of the latest configuration (the acquisition, or the last
 *       extension).
 * </ol>
 *
 * <p>Thread-safe; one instance per application and backend. Close it to release every lock it still
 * holds (immediately, whatever their {@code lockAtLeastFor}).
 */
public final class NolockLockProvider implements ExtensibleLockProvider, AutoCloseable {

  private final FencedLock locks;

  private NolockLockProvider(FencedLock locks) {
    this.locks = locks;
  }

  /**
   * A provider on {@code backend} holding locks for {@code purpose}: {@link
   * LockPurpose#CORRECTNESS} when the locked methods write through a fence with {@link
   * SchedulerLease#current()}{@code .lease()}, {@link LockPurpose#EFFICIENCY} when a duplicate run
   * is harmless (the token is then for logs only).
   */
  public static NolockLockProvider create(LockBackend backend, LockPurpose purpose) {
    if (purpose == null) {
      throw new IllegalArgumentException(
          "purpose is null: pass LockPurpose.CORRECTNESS when the locked methods fence their"
              + " writes with the token, LockPurpose.EFFICIENCY when a duplicate run is harmless.");
    }
    return create(backend, LockConfig.custom(purpose).autoRenew(false).build());
  }

  /**
   * A provider on {@code backend} with {@code config} (owner, metrics, lease-lost callback, clock).
   *
   * @throws IllegalArgumentException when {@code config} renews leases: ShedLock promises a lock is
   *     held at most {@code lockAtMostFor}
   */
  public static NolockLockProvider create(LockBackend backend, LockConfig config) {
    if (backend == null) {
      throw new IllegalArgumentException(
          "backend is null: pass a nolock lock backend, e.g."
              + " PostgresLockBackend.create(dataSource) or RedisLockBackend.create(connection).");
    }
    if (config == null) {
      throw new IllegalArgumentException(
          "config is null: pass LockConfig.custom(purpose).autoRenew(false).build().");
    }
    if (config.autoRenew()) {
      throw new IllegalArgumentException(
          "The LockConfig renews leases (autoRenew is on), but ShedLock holds a lock at most"
              + " lockAtMostFor: build it with LockConfig.custom(purpose).autoRenew(false), and"
              + " extend long runs with LockExtender.extendActiveLock or ShedLock's"
              + " KeepAliveLockProvider.");
    }
    return new NolockLockProvider(FencedLock.create(backend, config));
  }

  /**
   * Asks once for the lock {@code configuration} names.
   *
   * @return the held lock, or empty when another holder has it
   * @throws IllegalArgumentException for a name nolock refuses or a {@code lockAtMostFor} of zero
   *     or more than a week, saying how to fix the {@code @SchedulerLock}
   * @throws dev.nolock.patterns.BackendUnavailableException when the backend failed: unknown
   *     whether granted; a grant that landed ends by itself after {@code lockAtMostFor}
   */
  @Override
  public Optional<SimpleLock> lock(LockConfiguration configuration) {
    if (configuration == null) {
      throw new IllegalArgumentException(
          "configuration is null: pass ShedLock's LockConfiguration.");
    }
    String name = ShedLockNames.require(configuration.getName());
    Duration atMost = requireLockAtMostFor(configuration);
    long asked = locks.config().clock().nanoTime();
    Option<HeldLock> held = locks.tryAcquire(name, atMost);
    if (held.isEmpty()) {
      return Optional.empty();
    }
    return Optional.of(NolockSimpleLock.acquired(configuration, held.get(), asked, locks.config()));
  }

  /**
   * Stops the provider; a lock whose run has not unlocked it yet is left to end at its {@code
   * lockAtMostFor}, as ShedLock's own providers leave it: the scheduler may not wait for its
   * running tasks at shutdown, and releasing their locks would let another node start the same task
   * while this one's still runs. Locks already unlocked end at their {@code lockAtLeastFor} as
   * before.
   */
  @Override
  public void close() {
    locks.closeLeavingLeases();
  }

  private static Duration requireLockAtMostFor(LockConfiguration configuration) {
    Duration atMost = configuration.getLockAtMostFor();
    if (atMost.isZero() || atMost.compareTo(LockConfig.MAX_TTL) > 0) {
      throw new IllegalArgumentException(
          "lockAtMostFor of lock \""
              + ShedLockNames.printable(configuration.getName())
              + "\" is "
              + atMost
              + ": it must be longer than zero and at most "
              + LockConfig.MAX_TTL
              + ". Set @SchedulerLock(lockAtMostFor = ...) or"
              + " @EnableSchedulerLock(defaultLockAtMostFor = ...) to longer than the method can"
              + " run.");
    }
    return atMost;
  }
}
