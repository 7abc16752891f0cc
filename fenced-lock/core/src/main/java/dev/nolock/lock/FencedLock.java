package dev.nolock.lock;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.Listener;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RenewalScheduler;
import dev.nolock.patterns.RetryPolicy;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.random.RandomGenerator;
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
 *       jitter until {@code maxWait}; on a backend that queues waiters ({@link
 *       dev.nolock.patterns.FairLockBackend}, PostgreSQL's) it asks in turn, keeping a place in the
 *       queue that expires when the caller stops asking, and is woken by a release instead of
 *       sleeping the whole backoff.
 *   <li>Renew: every renewal interval (default TTL/3) a watchdog asks the backend to extend the
 *       lease <em>if it is still this grant's and this token's</em>. Success moves the deadline to
 *       the renewal's send time plus the TTL; a refusal loses the lease at once; a failed call is
 *       retried at the next interval unless the deadline has passed, which loses it. A renewal or
 *       {@link HeldLock#extend extension} is registered under the lease's monitor before it is sent
 *       and applied under it after its answer, but no backend call holds the monitor, so a slow
 *       extension holds up neither this lease's watchdog nor any other lease's. When several are
 *       out at once, the server keeps whichever landed last, which the holder cannot tell: a
 *       confirmed one is believed for no more than the shortest length of those that were out
 *       beside it (or whose answer was lost), counted from its own send time, and only if no
 *       renewal sent after it was applied already.
 *   <li>A separate timer loses the lease the moment its deadline passes without a successful
 *       renewal, even when a renewal call hangs.
 *   <li>Check, before each protected write ({@link HeldLock#checkPointOfNoReturn}): the time left
 *       must exceed the expected write time plus a margin that grows with the lease, the larger of
 *       the fixed safety margin and the lease's length times the assumed clock-rate drift ({@link
 *       LockConfig#safetyMarginFor}).
 *   <li>Release: the backend frees the lease only if it is still this grant's and token's.
 * </ol>
 *
 * <p>Thread-safe; one instance per process and backend is enough. Close it to release every held
 * lease and stop the watchdog.
 */
public final class FencedLock implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(FencedLock.class);
  private static final Duration MAX_WAIT = Duration.ofHours(1);
  private static final Duration LONGEST_FALLBACK = Duration.ofSeconds(1);

  private final LockBackend backend;
  private final LockConfig config;
  private final LeaseClock clock;
  private final CoordinationMetrics metrics;
  private final RenewalScheduler renewals;
  private final RenewalScheduler expiries;
  private final Map<HeldLock, Timers> held = new ConcurrentHashMap<>();
  private final AtomicBoolean closed = new AtomicBoolean();

  private record Timers(ScheduledFuture<?> renewal, Duration interval, ScheduledFuture<?> expiry) {
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
   * The locks this instance holds now: acquired through it, neither released nor lost. A snapshot
   * in no particular order, for monitoring: a lock in it may be released or lost right after.
   */
  public List<HeldLock> held() {
    return held.keySet().stream().filter(HeldLock::isHeld).toList();
  }

  /**
   * Asks once. It does not queue: on a backend that queues waiters it can take a free lease ahead
   * of them.
   *
   * @return the held lock, or empty when someone else holds it or the grant arrived after its TTL
   *     had run out
   * @throws IllegalArgumentException for a bad name or TTL, with how to fix it
   * @throws dev.nolock.patterns.BackendUnavailableException when the backend failed
   */
  public Option<HeldLock> tryAcquire(String name, Duration ttl) {
    Duration interval = validate(name, ttl);
    long start = clock.nanoTime();
    Option<HeldLock> result =
        attempt(name, ttl, interval, owner -> backend.tryAcquire(name, owner, ttl));
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
   * <p>On a backend that queues waiters ({@link FairLockBackend}) the callers waiting for one name
   * are served roughly in the order they began to wait, across processes: once the first waiter has
   * waited {@link LockConfig#patience()}, only it may take the lock, and a release wakes it at
   * once; the backoff is then only the longest wait for a wake-up that went missing. A waiter that
   * stops asking (its process died) loses its place after {@code 4 × min(backoffMax, 1 s) + 2 s},
   * and until then the waiters behind it are not served, even when the lock is free. Elsewhere, and
   * with a {@code maxWait} of zero (which asks once, as {@link #tryAcquire} does, without
   * queueing), the first to ask after a release wins.
   *
   * @return the held lock, or {@link NotAcquired} when someone else held it throughout, or (on a
   *     backend that queues) waiters ahead of this one kept their turn
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
    Either<NotAcquired, HeldLock> result =
        // A caller that will not wait does not queue: joining and leaving would cost two
        // statements, and the one attempt it makes is a tryAcquire.
        backend instanceof FairLockBackend fair && fair.wakesWaiters() && !maxWait.isZero()
            ? acquireInTurn(fair, name, ttl, interval, maxWait, start)
            : poll(name, ttl, interval, maxWait, start);
    if (result.isRight()) {
      metrics.acquired(since(start));
    } else {
      metrics.gaveUp(since(start));
    }
    return result;
  }

  /** Asks, and after each refusal sleeps a jittered exponential backoff, until {@code maxWait}. */
  private Either<NotAcquired, HeldLock> poll(
      String name, Duration ttl, Duration interval, Duration maxWait, long start) {
    return pollOn(name, ttl, interval, maxWait, start, 0);
  }

  /** {@link #poll}, counting on from {@code attemptsSoFar} attempts made before. */
  private Either<NotAcquired, HeldLock> pollOn(
      String name,
      Duration ttl,
      Duration interval,
      Duration maxWait,
      long start,
      int attemptsSoFar) {
    AtomicInteger attempts = new AtomicInteger(attemptsSoFar);
    Duration left = maxWait.minus(since(start));
    return waitPolicy(left.isNegative() ? Duration.ZERO : left)
        .run(
            clock,
            () -> {
              attempts.incrementAndGet();
              return attempt(name, ttl, interval, owner -> backend.tryAcquire(name, owner, ttl))
                  .toEither(() -> new NotAcquired(name, attempts.get(), since(start)));
            });
  }

  /**
   * Waits in the backend's queue ({@link FairLockBackend}):
   *
   * <ol>
   *   <li>Ask in turn, under a waiter identity of this call; a refusal keeps (or takes) this call's
   *       place in the queue for {@link #placeFor the place's length}.
   *   <li>After the first refusal, subscribe to the name's releases (an uncontended acquire costs
   *       the backend no listener). Whenever the backend cannot wake waiters (listening found not
   *       to work, the queue unusable), give the place up and poll as on any backend: a waiter
   *       first in line that is not woken would leave the lock idle while it sleeps.
   *   <li>Wait for a wake-up, or at most the backoff {@link #poll} would sleep (a wake-up can be
   *       lost, and an expired lease or place wakes nobody), then ask again.
   *   <li>However the wait ends without a grant (given up, interrupted, failed), give up the place
   *       so that the next waiter need not wait for it to expire.
   * </ol>
   *
   * A release that lands between the first refusal and the subscription wakes nobody; the first
   * backoff is the shortest ({@code backoffBase}), so the waiter asks again soon.
   */
  private Either<NotAcquired, HeldLock> acquireInTurn(
      FairLockBackend fair,
      String name,
      Duration ttl,
      Duration interval,
      Duration maxWait,
      long start) {
    String waiter = GrantOwner.newGrant(config.owner());
    Duration place = placeFor(config);
    RetryPolicy backoff = waitPolicy(maxWait);
    RandomGenerator random = ThreadLocalRandom.current();
    Semaphore woken = new Semaphore(0);
    FairLockBackend.Subscription subscription = null;
    boolean queued = true;
    try {
      for (int attempts = 1; ; attempts++) {
        Option<HeldLock> lock =
            attempt(
                name,
                ttl,
                interval,
                owner -> fair.tryAcquireInTurn(name, owner, ttl, waiter, place, config.patience()));
        if (lock.isDefined()) {
          queued = false;
          return Either.right(lock.get());
        }
        Duration left = maxWait.minus(since(start));
        if (left.isNegative() || left.isZero()) {
          return Either.left(new NotAcquired(name, attempts, since(start)));
        }
        if (!fair.wakesWaiters()) {
          queued = false;
          leaveQuietly(fair, name, waiter);
          if (subscription != null) {
            subscription.close();
            subscription = null;
          }
          return pollOn(name, ttl, interval, maxWait, start, attempts);
        }
        if (subscription == null) {
          subscription = fair.onRelease(name, waiter, woken::release);
        }
        Duration delay = backoff.backoff(attempts, random);
        if (delay.compareTo(fallbackFor(config)) > 0) {
          delay = fallbackFor(config);
        }
        try {
          if (clock.await(woken, delay.compareTo(left) < 0 ? delay : left)) {
            // Every wake-up so far is answered by the next attempt.
            woken.drainPermits();
          }
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          return Either.left(new NotAcquired(name, attempts, since(start)));
        }
      }
    } finally {
      if (subscription != null) {
        subscription.close();
      }
      if (queued) {
        leaveQuietly(fair, name, waiter);
      }
    }
  }

  /**
   * How long a waiter's place is kept after each attempt: four of its longest waits plus 2 s (at
   * most 6 s), far longer than a live waiter takes between two attempts (at most one wait and a
   * round trip), and short enough that a waiter that died holds the others up for seconds, not a
   * lease.
   */
  static Duration placeFor(LockConfig config) {
    return fallbackFor(config).multipliedBy(4).plusSeconds(2);
  }

  /**
   * The longest wait of a waiter in the queue for a wake-up before it asks again: the backoff's
   * ceiling, but no more than {@link #LONGEST_FALLBACK}, so that the place of a waiter that died
   * (whose length follows from this) holds the others up for seconds whatever its configuration.
   */
  private static Duration fallbackFor(LockConfig config) {
    return config.backoffMax().compareTo(LONGEST_FALLBACK) < 0
        ? config.backoffMax()
        : LONGEST_FALLBACK;
  }

  private RetryPolicy waitPolicy(Duration maxWait) {
    return RetryPolicy.custom()
        .maxAttempts(Integer.MAX_VALUE)
        .maxElapsed(maxWait.isZero() ? Duration.ofNanos(1) : maxWait)
        .baseDelay(config.backoffBase())
        .maxDelay(config.backoffMax())
        .build();
  }

  private static void leaveQuietly(FairLockBackend fair, String name, String waiter) {
    try {
      fair.leaveQueue(name, waiter);
    } catch (RuntimeException e) {
      LOG.debug("Could not leave the queue of {}; the place expires on its own", name, e);
    }
  }

  /**
   * Acquires (waiting up to {@code maxWait}), runs {@code work} with the held lock, and releases it
   * whatever happens. The work must call {@link HeldLock#checkPointOfNoReturn} before each
   * protected write and, for a correctness lock, send it with {@link HeldLock#lease()} through a
   * fence.
   *
   * <p>What the work throws, checked or not, reaches the caller unchanged (the same instance),
   * after the lock was released; a release that fails on the backend is logged and never replaces
   * it.
   *
   * @return the work's result, or {@link NotAcquired}
   * @throws X what the work threw
   */
  public <T, X extends Exception> Either<NotAcquired, T> withLock(
      String name, Duration ttl, Duration maxWait, LockedWork<? extends T, X> work) throws X {
    if (work == null) {
      throw new IllegalArgumentException(
          "work is null: pass the work to run under the lock, e.g. held -> charge(held.lease())");
    }
    Either<NotAcquired, HeldLock> acquired = acquire(name, ttl, maxWait);
    if (acquired.isLeft()) {
      return Either.left(acquired.getLeft());
    }
    try (HeldLock lock = acquired.get()) {
      return Either.right(work.run(lock));
    }
  }

  /**
   * Stops this instance's watchdog without releasing the leases it holds: each ends at its TTL. For
   * an owner whose work may still run when it is closed (a scheduler's lock provider at shutdown,
   * whose tasks the scheduler does not wait for): releasing would let another instance start the
   * same work while this one's still runs. Idempotent; afterwards this instance grants nothing, as
   * after {@link #close()}.
   */
  public void closeLeavingLeases() {
    if (!closed.compareAndSet(false, true)) {
      return;
    }
    renewals.close();
    expiries.close();
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

  /** One ask: {@code grant} sends it for a new grant owner. */
  private Option<HeldLock> attempt(
      String name, Duration ttl, Duration interval, Function<String, Option<FencingToken>> grant) {
    long sent = clock.nanoTime();
    String owner = GrantOwner.newGrant(config.owner());
    Option<FencingToken> token = grant.apply(owner);
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
      held.put(lock, new Timers(renewal, interval, watchExpiry(lock, deadline)));
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
    HeldLock.Flight flight;
    synchronized (lock.renewing()) {
      flight = lock.send(lock.ttl(), false, clock);
    }
    if (flight == null) {
      return; // lost, released or kept meanwhile
    }
    boolean renewed;
    try {
      renewed = backend.renew(lock.name(), lock.owner(), lock.token(), flight.length());
    } catch (RuntimeException e) {
      metrics.renewalFailed();
      synchronized (lock.renewing()) {
        lock.unanswered(flight);
      }
      LOG.warn("Renewal of {} failed; retrying at the next interval", lock, e);
      if (lock.deadline().hasExpired()) {
        lock.lose(LostLease.Cause.RAN_OUT, "renewals failed until the lease ran out (" + e + ")");
      }
      return;
    }
    if (!renewed) {
      metrics.renewalFailed();
      synchronized (lock.renewing()) {
        lock.refused(flight);
      }
      // Outside the monitor: the callback is user code, and may release or extend.
      lock.lose(
          LostLease.Cause.REFUSED,
          "the backend refused the renewal: the lease expired or another holder has it");
    } else if (confirm(lock, flight) == HeldLock.Confirmed.NOT_HELD) {
      // The renewal landed after the holder gave the lease up (lost at its deadline, or released
      // while the call was out): nobody believes they hold it, so free it now, not a TTL later.
      releaseQuietly(lock.name(), lock.owner(), lock.token());
    }
  }

  /** Applies a confirmed renewal or extension and moves the timers to match. */
  private HeldLock.Confirmed confirm(HeldLock lock, HeldLock.Flight flight) {
    synchronized (lock.renewing()) {
      HeldLock.Confirmed confirmed = lock.confirmed(flight, clock);
      if (confirmed != HeldLock.Confirmed.NOT_HELD) {
        metrics.renewed();
      }
      if (confirmed == HeldLock.Confirmed.APPLIED) {
        reschedule(lock);
      }
      return confirmed;
    }
  }

  /**
   * {@link HeldLock#extend}. The backend call runs outside the lease's renewal monitor: while it is
   * out, the watchdog goes on renewing this lease (with its current length) and every other one.
   */
  void extend(HeldLock lock, Duration ttl) {
    config.renewalIntervalFor(ttl); // refuses a TTL the watchdog could not keep
    requireHeld(lock);
    HeldLock.Flight flight;
    synchronized (lock.renewing()) {
      flight = lock.send(ttl, true, clock);
      if (flight == null) {
        // Lost or released since the check above, or being kept by releaseNoEarlierThan: say
        // which, as the check would have.
        requireHeld(lock);
        throw released(lock);
      }
      if (flight.shortened()) {
        reschedule(lock);
      }
    }
    boolean renewed;
    try {
      renewed = backend.renew(lock.name(), lock.owner(), lock.token(), ttl);
    } catch (RuntimeException e) {
      metrics.renewalFailed();
      // Applied or not, unknown: the server's lease ends at its old end or ttl after the call, and
      // the holder counts the sooner of the two; the watchdog renews with ttl from now on.
      synchronized (lock.renewing()) {
        lock.extensionUnanswered(flight, clock);
        reschedule(lock);
      }
      throw e;
    }
    if (!renewed) {
      metrics.renewalFailed();
      synchronized (lock.renewing()) {
        lock.refused(flight);
      }
      lock.lose(
          LostLease.Cause.REFUSED,
          "the backend refused the extension to "
              + ttl
              + ": the lease expired or another holder has it");
      throw new LeaseLostException(lock.lostMessage());
    }
    if (confirm(lock, flight) == HeldLock.Confirmed.NOT_HELD) {
      // Lost or released while the extension was out: nobody holds it any more.
      releaseQuietly(lock.name(), lock.owner(), lock.token());
      requireHeld(lock);
    }
  }

  private static IllegalStateException released(HeldLock lock) {
    return new IllegalStateException(
        "Lock \"" + lock.name() + "\" was released; acquire it again.");
  }

  private void requireHeld(HeldLock lock) {
    if (lock.isLost()) {
      throw new LeaseLostException(lock.lostMessage());
    }
    if (!lock.isHeld()) {
      throw released(lock);
    }
    if (lock.deadline().hasExpired()) {
      ranOut(lock);
      throw new LeaseLostException(lock.lostMessage());
    }
  }

  /**
   * Moves the expiry timer to the lease's deadline and, when a watchdog runs and the interval for
   * the shorter of the TTL and the length the deadline counts differs from the current one, renews
   * at that interval from now on: whichever length the server may have, it is renewed in time.
   * Called under the lease's renewal monitor, so that the timers follow the deadline in the order
   * it moved.
   */
  private void reschedule(HeldLock lock) {
    Duration ttl = lock.ttl();
    Deadline deadline = lock.deadline();
    Duration counted = deadline.leaseDuration();
    Duration interval = config.renewalIntervalFor(counted.compareTo(ttl) < 0 ? counted : ttl);
    held.computeIfPresent(
        lock,
        (l, timers) -> {
          timers.expiry().cancel(false);
          ScheduledFuture<?> renewal = timers.renewal();
          Duration every = timers.interval();
          if (renewal != null && !interval.equals(every)) {
            renewal.cancel(false);
            renewal = renewals.repeat(() -> renew(l), interval);
            every = interval;
          }
          return new Timers(renewal, every, watchExpiry(l, deadline));
        });
  }

  /** The lease's deadline passed while held: the expected end without a watchdog, a loss with. */
  void ranOut(HeldLock lock) {
    if (config.autoRenew()) {
      lock.lose(LostLease.Cause.RAN_OUT, "the lease ran out before a renewal succeeded");
    } else {
      lock.lose(
          LostLease.Cause.TTL_REACHED,
          "the lease reached its TTL of " + lock.ttl() + " (auto-renewal is off)");
    }
  }

  private ScheduledFuture<?> watchExpiry(HeldLock lock, Deadline deadline) {
    return expiries.once(
        () -> {
          if (lock.isHeld() && lock.deadline().hasExpired()) {
            ranOut(lock);
          }
        },
        deadline.remaining().plusNanos(1));
  }

  /** Called once by {@link HeldLock#lose}. */
  void lost(HeldLock lock, LostLease.Cause cause, String reason) {
    Timers timers = held.remove(lock);
    if (timers != null) {
      timers.cancel();
    }
    metrics.leaseLost();
    metrics.held(since(lock.acquiredAtNanos()));
    // The hook's failure only: the watchdog, and the caller of extend, go on. An interrupt it
    // threw stays the thread's (Listener.tell sets the flag again).
    Listener.tell(
            config.onLeaseLost(),
            new LostLease(lock.name(), lock.owner(), lock.token(), cause, reason))
        .forEach(e -> LOG.error("The lease-lost callback for {} threw", lock, e));
  }

  /** Called once by {@link HeldLock#release}, after it marked the lock released. */
  ReleaseOutcome released(HeldLock lock, HeldLock.State before) {
    Timers timers = held.remove(lock);
    if (timers != null) {
      timers.cancel();
    }
    if (before != HeldLock.State.HELD) {
      // Lost before: free it anyway in case the server still keeps it, but the holder's answer is
      // that it had ended.
      releaseQuietly(lock.name(), lock.owner(), lock.token());
      return new ReleaseOutcome.Lost(lock.lostCause(), lock.lostReason());
    }
    metrics.held(since(lock.acquiredAtNanos()));
    boolean freed;
    try {
      freed = backend.release(lock.name(), lock.owner(), lock.token());
    } catch (RuntimeException e) {
      releaseFailed(lock.name(), lock.owner(), lock.token(), e);
      return new ReleaseOutcome.Unknown(e);
    }
    return freed ? new ReleaseOutcome.Released() : goneAtRelease(lock, "release");
  }

  /** Called once by {@link HeldLock#releaseNoEarlierThan}. */
  ReleaseOutcome keep(HeldLock lock, Duration afterAcquiring) {
    Timers timers = held.remove(lock);
    if (timers != null) {
      timers.cancel();
    }
    long sent;
    Duration keep = null;
    Duration believable = null;
    synchronized (lock.renewing()) {
      // No renewal is sent from here on, and none still out lands after the keeping one.
      lock.keepFromNowOn();
      sent = clock.nanoTime();
      long missing = afterAcquiring.toNanos() - (sent - lock.acquiredAtNanos());
      if (lock.isHeld() && missing > 0 && !lock.deadline().hasExpired()) {
        // Whole milliseconds, rounded up: every backend keeps at least that, none refuses it.
        keep = Duration.ofMillis((missing + 999_999) / 1_000_000);
        // A shorter renewal whose answer was lost may land later and end the lease sooner.
        believable = lock.believable(keep);
      }
    }
    // Outside the monitor: the backend call (no renewal waits for it), and a release, which may
    // call the lease-lost callback, user code.
    return keep != null ? keepFor(lock, sent, keep, believable) : lock.release();
  }

  private ReleaseOutcome keepFor(HeldLock lock, long sent, Duration keep, Duration believable) {
    boolean renewed;
    try {
      renewed = backend.renew(lock.name(), lock.owner(), lock.token(), keep);
    } catch (RuntimeException e) {
      lock.markReleased();
      metrics.held(since(lock.acquiredAtNanos()));
      releaseFailed(lock.name(), lock.owner(), lock.token(), e);
      return new ReleaseOutcome.Unknown(e);
    }
    HeldLock.State before = lock.markReleased();
    if (before != HeldLock.State.HELD) {
      return new ReleaseOutcome.Lost(lock.lostCause(), lock.lostReason());
    }
    metrics.held(since(lock.acquiredAtNanos()));
    return renewed
        ? new ReleaseOutcome.KeptUntil(Deadline.forHolder(clock, sent, believable))
        : goneAtRelease(lock, "renewal that keeps it until the time asked for");
  }

  /**
   * A release (or its keeping renewal) that found the lease no longer this grant's, although the
   * holder's deadline had not passed: the server expired it sooner than the holder measured, or it
   * lost its state. Worth a warning whatever the configuration.
   */
  private ReleaseOutcome goneAtRelease(HeldLock lock, String call) {
    String reason =
        "the backend refused the "
            + call
            + ": the lease had expired on the server or another holder has it";
    lock.lostAtRelease(LostLease.Cause.REFUSED, reason);
    metrics.leaseLost();
    LOG.warn("{}: {}", lock, reason);
    return new ReleaseOutcome.Lost(LostLease.Cause.REFUSED, reason);
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
      releaseFailed(name, owner, token, e);
    }
  }

  private void releaseFailed(String name, String owner, FencingToken token, RuntimeException e) {
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

  private Duration since(long startNanos) {
    return Duration.ofNanos(Math.max(0, clock.nanoTime() - startNanos));
  }
}
