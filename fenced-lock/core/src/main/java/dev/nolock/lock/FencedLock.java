package dev.nolock.lock;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RenewalScheduler;
import dev.nolock.patterns.RetryPolicy;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The lock to fall back on when no lock-free design fits: a lease per name on a {@link
 * LockBackend}, with a fencing token per grant and a watchdog that renews by compare-and-swap.
 *
 * <p>What it promises is <b>not</b> "only one holder": no TTL lock can (a holder paused past its
 * lease still believes it holds it). It promises that a {@link LockPurpose#CORRECTNESS} holder gets
 * a strictly increasing {@link FencingToken} with which the protected resource can refuse a stale
 * holder's write ({@code dev.nolock.patterns.sql.Fence}), that the holder learns of a lost lease at
 * once (callback and {@link dev.nolock.patterns.LeaseLostException} on its next check), and that no
 * renewal, release or fenced write of one grant ever passes as another's, even when a backend that
 * lost its state hands an equal token to a second grant of the same process.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>Acquire: read the clock, ask the backend to grant the lease to a new grant identity (the
 *       configured owner plus a random nonce, {@link dev.nolock.patterns.GrantOwner}; the backend
 *       bumps the token in the same step), and count the lease from that first reading, so the
 *       round trip is subtracted. {@link #acquire} repeats this with exponential backoff and full
 *       jitter until {@code maxWait}.
 *   <li>Renew: every renewal interval (default TTL/3) a watchdog asks the backend to extend the
 *       lease <em>if it is still this grant's and this token's</em>. Success moves the deadline to
 *       the renewal's send time plus the TTL; a refusal loses the lease at once; a failed call is
 *       retried at the next interval unless the deadline has passed, which loses it.
 *   <li>A separate timer loses the lease the moment its deadline passes without a successful
 *       renewal, even when a renewal call hangs.
 *   <li>Release: the backend frees the lease only if it is still this grant's and token's.
 * </ol>
 *
 * <p>Thread-safe; one instance per process and backend is enough. Close it to release every held
 * lease and stop the watchdog.
 */
public final class FencedLock implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(FencedLock.class);
  private static final Duration MAX_WAIT = Duration.ofHours(1);

  private final LockBackend backend;
  private final LockConfig config;
  private final LeaseClock clock;
  private final CoordinationMetrics metrics;
  private final RenewalScheduler renewals;
  private final RenewalScheduler expiries;
  private final Map<HeldLock, Timers> held = new ConcurrentHashMap<>();
  private final AtomicBoolean closed = new AtomicBoolean();

  private record Timers(ScheduledFuture<?> renewal, ScheduledFuture<?> expiry) {
    void cancel() {
      if (renewal != null) {
        renewal.cancel(false);
      }
      if (expiry != null) {
        expiry.cancel(false);
      }
    }
  }

  private FencedLock(LockBackend backend, LockConfig config) {
    this.backend = Objects.requireNonNull(backend, "backend");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = config.clock();
    this.metrics = config.metrics();
    // Two threads: a renewal call that hangs on a dead network must not delay the timer that
    // tells the holder its lease ran out.
    this.renewals = RenewalScheduler.named("nolock-lock-renewal");
    this.expiries = RenewalScheduler.named("nolock-lock-expiry");
  }

  /** A lock on {@code backend} with {@code config}. */
  public static FencedLock create(LockBackend backend, LockConfig config) {
    return new FencedLock(backend, config);
  }

  public LockConfig config() {
    return config;
  }

  /**
   * Asks once.
   *
   * @return the held lock, or empty when someone else holds it or the grant arrived after its TTL
   *     had run out
   * @throws IllegalArgumentException for a bad name or TTL, with how to fix it
   * @throws dev.nolock.patterns.BackendUnavailableException when the backend failed
   */
  public Option<HeldLock> tryAcquire(String name, Duration ttl) {
    Duration interval = validate(name, ttl);
    long start = clock.nanoTime();
    Option<HeldLock> result = attempt(name, ttl, interval);
    Duration took = Duration.ofNanos(clock.nanoTime() - start);
    if (result.isDefined()) {
      metrics.acquired(took);
    } else {
      metrics.gaveUp(took);
    }
    return result;
  }

  /**
   * Asks until granted or until {@code maxWait} has passed, sleeping a jittered exponential backoff
   * between attempts (never spinning). An interrupt ends the wait with the interrupt flag set.
   *
   * @return the held lock, or {@link NotAcquired} when someone else held it throughout
   */
  public Either<NotAcquired, HeldLock> acquire(String name, Duration ttl, Duration maxWait) {
    Duration interval = validate(name, ttl);
    Objects.requireNonNull(maxWait, "maxWait");
    if (maxWait.isNegative() || maxWait.compareTo(MAX_WAIT) > 0) {
      throw new IllegalArgumentException(
          "maxWait must be between zero and "
              + MAX_WAIT
              + ", got "
              + maxWait
              + ": use"
              + " tryAcquire to ask once.");
    }
    long start = clock.nanoTime();
    AtomicInteger attempts = new AtomicInteger();
    RetryPolicy policy =
        RetryPolicy.custom()
            .maxAttempts(Integer.MAX_VALUE)
            .maxElapsed(maxWait.isZero() ? Duration.ofNanos(1) : maxWait)
            .baseDelay(config.backoffBase())
            .maxDelay(config.backoffMax())
            .build();
    Either<NotAcquired, HeldLock> result =
        policy.run(
            clock,
            () -> {
              attempts.incrementAndGet();
              return attempt(name, ttl, interval)
                  .toEither(() -> new NotAcquired(name, attempts.get(), since(start)));
            });
    if (result.isRight()) {
      metrics.acquired(since(start));
    } else {
      metrics.gaveUp(since(start));
    }
    return result;
  }

  /**
   * Acquires (waiting up to {@code maxWait}), runs {@code work} with the held lock, and releases it
   * whatever happens. The work must call {@link HeldLock#checkPointOfNoReturn} before each
   * protected write and, for a correctness lock, send it with {@link HeldLock#lease()} through a
   * fence.
   *
   * @return the work's result, or {@link NotAcquired}
   */
  public <T> Either<NotAcquired, T> withLock(
      String name, Duration ttl, Duration maxWait, Function<HeldLock, ? extends T> work) {
    Objects.requireNonNull(work, "work");
    return acquire(name, ttl, maxWait)
        .map(
            lock -> {
              try (lock) {
                return work.apply(lock);
              }
            });
  }

  /** Releases every lease this instance holds and stops its watchdog; idempotent. */
  @Override
  public void close() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    for (HeldLock lock : held.keySet()) {
      try {
        lock.release();
      } catch (RuntimeException e) {
        LOG.warn("Could not release {} on close; it expires after its TTL", lock, e);
      }
    }
    renewals.close();
    expiries.close();
  }

  private Duration validate(String name, Duration ttl) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    Duration interval = config.renewalIntervalFor(ttl);
    if (closed.get()) {
      throw new IllegalStateException("This FencedLock was closed; create a new one.");
    }
    return interval;
  }

  private Option<HeldLock> attempt(String name, Duration ttl, Duration interval) {
    long sent = clock.nanoTime();
    String owner = GrantOwner.newGrant(config.owner());
    Option<FencingToken> token = backend.tryAcquire(name, owner, ttl);
    if (token.isEmpty()) {
      metrics.conflict();
      return Option.none();
    }
    Deadline deadline = Deadline.forHolder(clock, sent, ttl);
    if (deadline.hasExpired()) {
      // The grant came back after the whole TTL (a pause, a slow backend, a resend): another
      // holder may have it by now. Handing it out would give the caller a lease it cannot use.
      metrics.conflict();
      releaseQuietly(name, owner, token.get());
      return Option.none();
    }
    HeldLock lock = new HeldLock(this, name, owner, token.get(), ttl, deadline, sent);
    try {
      ScheduledFuture<?> renewal =
          config.autoRenew() ? renewals.repeat(() -> renew(lock), interval) : null;
      held.put(lock, new Timers(renewal, watchExpiry(lock, deadline)));
    } catch (RejectedExecutionException closedMeanwhile) {
      // close() ran while the grant was on its way: nobody would renew or release it.
      releaseQuietly(name, owner, token.get());
      throw closedWhileAcquiring(closedMeanwhile);
    }
    if (closed.get()) {
      // close() began before this lease was registered: its pass over the held leases may have
      // missed it, and the timers just scheduled are dropped when it shuts the schedulers down.
      // The registration comes before this read and close() marks before it passes, so one of
      // the two always releases the lease (release is idempotent).
      lock.release();
      throw closedWhileAcquiring(null);
    }
    return Option.some(lock);
  }

  private static IllegalStateException closedWhileAcquiring(Throwable cause) {
    return new IllegalStateException(
        "This FencedLock was closed while acquiring; the grant was released. Create a new"
            + " FencedLock to acquire again.",
        cause);
  }

  private void renew(HeldLock lock) {
    if (!lock.isHeld()) {
      return;
    }
    long sent = clock.nanoTime();
    boolean renewed;
    try {
      renewed = backend.renew(lock.name(), lock.owner(), lock.token(), lock.ttl());
    } catch (RuntimeException e) {
      metrics.renewalFailed();
      LOG.warn("Renewal of {} failed; retrying at the next interval", lock, e);
      if (lock.deadline().hasExpired()) {
        lock.lose("renewals failed until the lease ran out (" + e + ")");
      }
      return;
    }
    if (!renewed) {
      metrics.renewalFailed();
      lock.lose("the backend refused the renewal: the lease expired or another holder has it");
      return;
    }
    Deadline deadline = Deadline.forHolder(clock, sent, lock.ttl());
    if (!lock.isHeld()) {
      // The renewal landed after the holder gave the lease up (lost at its deadline, or released
      // while the call was out): nobody believes they hold it, so free it now, not a TTL later.
      releaseQuietly(lock.name(), lock.owner(), lock.token());
      return;
    }
    lock.renewed(deadline);
    metrics.renewed();
    held.computeIfPresent(
        lock,
        (l, timers) -> {
          timers.expiry().cancel(false);
          return new Timers(timers.renewal(), watchExpiry(l, deadline));
        });
  }

  private ScheduledFuture<?> watchExpiry(HeldLock lock, Deadline deadline) {
    return expiries.once(
        () -> {
          if (lock.isHeld() && lock.deadline().hasExpired()) {
            lock.lose("the lease ran out before a renewal succeeded");
          }
        },
        deadline.remaining().plusNanos(1));
  }

  /** Called once by {@link HeldLock#lose}. */
  void lost(HeldLock lock, String reason) {
    Timers timers = held.remove(lock);
    if (timers != null) {
      timers.cancel();
    }
    metrics.leaseLost();
    metrics.held(since(lock.acquiredAtNanos()));
    try {
      config.onLeaseLost().accept(new LostLease(lock.name(), lock.owner(), lock.token(), reason));
    } catch (RuntimeException e) {
      LOG.error("The lease-lost callback for {} threw", lock, e);
    }
  }

  /** Called once by {@link HeldLock#release}. */
  void released(HeldLock lock, boolean wasHeld) {
    Timers timers = held.remove(lock);
    if (timers != null) {
      timers.cancel();
    }
    if (wasHeld) {
      metrics.held(since(lock.acquiredAtNanos()));
    }
    releaseQuietly(lock.name(), lock.owner(), lock.token());
  }

  /**
   * Releases a grant and never throws for the backend. The work under the lock is done (or failed
   * on its own): throwing here would make a finished job look failed, and a caller that retries it
   * would do it twice. The lease, freed or not, ends at its TTL; the grant's identity is never used
   * again.
   */
  private void releaseQuietly(String name, String owner, FencingToken token) {
    try {
      backend.release(name, owner, token);
    } catch (RuntimeException e) {
      metrics.releaseFailed();
      if (e instanceof BackendUnavailableException) {
        LOG.warn(
            "Release of {} by {} (token {}) failed or lost its answer; it ends at its TTL",
            name,
            owner,
            token.value(),
            e);
      } else {
        LOG.error(
            "Release of {} by {} (token {}) failed on an unexpected exception; it ends at its TTL",
            name,
            owner,
            token.value(),
            e);
      }
    }
  }

  private Duration since(long startNanos) {
    return Duration.ofNanos(Math.max(0, clock.nanoTime() - startNanos));
  }
}
