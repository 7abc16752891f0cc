package dev.nolock.lock;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseLostException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A lease this process holds on one lock, kept alive by the {@link FencedLock}'s watchdog until it
 * is released or lost. Close it (try-with-resources) to release.
 *
 * <p>Before every protected write call {@link #checkPointOfNoReturn(Duration)}; for a {@link
 * LockPurpose#CORRECTNESS} lock, send the write with {@link #lease()} through a {@code
 * dev.nolock.patterns.sql.Fence}, because a pause between the check and the write can still outlast
 * the lease.
 *
 * <p>Thread-safe. States: held → lost (renewal refused, or the lease ran out) → lost and released,
 * or held → released; each change happens once. A lost lease stays lost when it is released (the
 * usual {@code try (HeldLock held = ...)} releases it on the way out of a {@link
 * LeaseLostException}), so whoever asks afterwards still learns that it was lost.
 */
public final class HeldLock implements AutoCloseable {

  enum State {
    HELD,
    LOST,
    RELEASED,
    LOST_AND_RELEASED
  }

  private final FencedLock lock;
  private final String name;
  private final String owner;
  private final FencingToken token;
  private final long acquiredAtNanos;
  private final AtomicReference<State> state = new AtomicReference<>(State.HELD);

  /**
   * Guards the renewal bookkeeping below, and is held only while it changes: never across a backend
   * call, so that a renewal or extension that hangs on the backend holds up neither another renewal
   * of this lease nor (through the watchdog's one thread) the renewals of other leases.
   */
  private final Object renewing = new Object();

  /** Held while releasing, so that a second release waits for the first one's outcome. */
  private final Object releasing = new Object();

  private volatile Duration ttl;
  private volatile Deadline deadline;
  // Guarded by renewing: the clock reading the deadline counts from (its length is the deadline's).
  private long deadlineStartNanos;
  // Guarded by renewing: the shortest length of a renewal whose answer was lost, or null.
  private Duration shortestUnanswered;
  // Guarded by renewing: renewals and extensions sent and not yet answered.
  private final List<Flight> flights = new ArrayList<>();
  // Guarded by renewing: the number of the last flight sent, of the newest whose confirmation set
  // the deadline, and of the newest that set the TTL.
  private long lastSent;
  private long deadlineSetBy;
  private long ttlSetBy;
  // Guarded by renewing: releaseNoEarlierThan took over; no renewal or extension is sent any more.
  private boolean keeping;
  private volatile LostLease.Cause lostCause;
  private volatile String lostReason;
  private ReleaseOutcome outcome; // guarded by releasing

  HeldLock(
      FencedLock lock,
      String name,
      String owner,
      FencingToken token,
      Duration ttl,
      Deadline deadline,
      long acquiredAtNanos) {
    this.lock = lock;
    this.name = name;
    this.owner = owner;
    this.token = token;
    this.ttl = ttl;
    this.deadline = deadline;
    this.deadlineStartNanos = acquiredAtNanos;
    this.acquiredAtNanos = acquiredAtNanos;
  }

  public String name() {
    return name;
  }

  /**
   * The identity of this grant: the lock's {@link LockConfig#owner()} plus a nonce of its own
   * ({@link dev.nolock.patterns.GrantOwner}), so that no other grant, not even one of this process
   * with an equal token, can pass a fence, renew or release as this one.
   */
  public String owner() {
    return owner;
  }

  /**
   * This grant's fencing token, for logs and metrics, whatever the lock's purpose. A {@link
   * LockPurpose#EFFICIENCY} lock reads it too, but must not guard writes with it: only {@link
   * #lease()} (refused for such a lock) goes to a fence.
   */
  public FencingToken token() {
    return token;
  }

  /** When the lease ends as this holder measures it; moves forward with each renewal. */
  public Deadline deadline() {
    return deadline;
  }

  /** The TTL the lease is renewed with: the acquiring TTL, or the last {@link #extend} length. */
  public Duration ttl() {
    return ttl;
  }

  /** True until the lease is lost or released. */
  public boolean isHeld() {
    return state.get() == State.HELD;
  }

  /** True once the lease was lost (renewal refused, or it ran out); never becomes false again. */
  public boolean isLost() {
    State current = state.get();
    return current == State.LOST || current == State.LOST_AND_RELEASED;
  }

  /**
   * The grant to pass to a {@code dev.nolock.patterns.sql.Fence}: lock name, this grant's {@link
   * #owner()}, fencing token and the current deadline.
   *
   * @throws IllegalStateException for an {@link LockPurpose#EFFICIENCY} lock, which must not guard
   *     writes a second holder would corrupt
   */
  public Lease lease() {
    if (lock.config().purpose() != LockPurpose.CORRECTNESS) {
      throw new IllegalStateException(
          "Lock \""
              + name
              + "\" was created for EFFICIENCY: it hands out no fencing lease because"
              + " duplicate work under it must be harmless (token() is there for logs). If it"
              + " guards writes a second holder would corrupt, create it with"
              + " LockConfig.custom(LockPurpose.CORRECTNESS) and send each write with lease()"
              + " through a Fence.");
    }
    return new Lease(name, owner, token, deadline);
  }

  /**
   * Call immediately before each protected write. Passes only while the lease is held and {@code
   * remaining - margin > expectedWriteTime}, where the margin is {@link LockConfig#safetyMarginFor}
   * the length the current deadline counts: the fixed safety margin, or the clock drift a lease
   * that long can accumulate when that is more (302.4 s for a week with the default 500 ppm), so
   * that a holder never writes in the part of a long lease that a server whose clock runs faster
   * may already have ended.
   *
   * @throws LeaseLostException when the write must not be sent: stop writing, re-acquire
   * @throws IllegalStateException when this lock was already released
   * @throws IllegalArgumentException when the configured safety margin is half the TTL or more, so
   *     that no write could ever pass
   */
  public void checkPointOfNoReturn(Duration expectedWriteTime) {
    Objects.requireNonNull(expectedWriteTime, "expectedWriteTime");
    State current = state.get();
    if (current == State.RELEASED || current == State.LOST_AND_RELEASED) {
      throw new IllegalStateException(
          "Lock \"" + name + "\" was released; acquire it again before writing.");
    }
    if (current == State.LOST) {
      throw new LeaseLostException(lostMessage());
    }
    lock.config().requireMarginFits(ttl);
    Deadline now = deadline;
    if (now.hasExpired()) {
      lock.ranOut(this);
      throw new LeaseLostException(lostMessage());
    }
    now.checkPointOfNoReturn(lock.config().safetyMarginFor(now.leaseDuration()), expectedWriteTime);
  }

  /**
   * Sets the lease to end {@code ttl} from now, shorter or longer than before, and renews it with
   * {@code ttl} from then on (with auto-renewal on, every {@link LockConfig#renewalInterval()} or
   * {@code ttl/3}). A job without a watchdog calls this to ask for more time; one that knows it
   * needs less gives time back.
   *
   * <p>Algorithm:
   *
   * <ol>
   *   <li>Under the lease's renewal monitor: read the clock and register the extension as out; if
   *       {@code ttl} from that reading ends sooner than the current deadline, the deadline moves
   *       there at once (the server may apply it at any moment from now).
   *   <li>Outside the monitor, ask the backend to renew this grant with {@code ttl} (a
   *       compare-and-swap on owner and token, see {@link dev.nolock.patterns.LockBackend#renew}).
   *       Meanwhile the watchdog goes on renewing this lease and every other one.
   *   <li>On success, under the monitor: the deadline becomes that reading plus {@code ttl}, or
   *       plus the shortest length of any renewal that was out beside this one or whose answer was
   *       lost (it may have landed after this one), unless a renewal sent after this one was
   *       applied already.
   *   <li>When the call fails its outcome is unknown: the server's lease now ends either where it
   *       did or {@code ttl} after the call, so the deadline is the sooner of the two, decided on
   *       the two ends without reading the clock again, and the exception is rethrown.
   * </ol>
   *
   * @throws LeaseLostException when the backend refused: the lease had expired or someone else has
   *     it (it is now lost)
   * @throws IllegalStateException when this lock was already released (or is being released by
   *     {@link #releaseNoEarlierThan})
   * @throws IllegalArgumentException for a TTL outside (0, {@link LockConfig#MAX_TTL}], or one the
   *     renewal interval does not fit
   * @throws dev.nolock.patterns.BackendUnavailableException when the backend failed (see above)
   */
  public void extend(Duration ttl) {
    lock.extend(this, ttl);
  }

  /**
   * Releases the lease if it is still this holder's; idempotent (a second call returns the first
   * one's outcome). Never throws for the backend: a release that fails or loses its answer is
   * logged and counted ({@code nolock.release.failures}) and answered {@link
   * ReleaseOutcome.Unknown}, and the lease ends at its TTL, so that closing the lock never turns
   * finished work into a failure that a caller would retry.
   *
   * @return {@link ReleaseOutcome.Released} when this call freed the lease; {@link
   *     ReleaseOutcome.Lost} when it had already run out or passed to another holder; {@link
   *     ReleaseOutcome.Unknown} when the backend failed
   */
  public ReleaseOutcome release() {
    synchronized (releasing) {
      if (outcome != null) {
        return outcome;
      }
      if (state.get() == State.HELD && deadline.hasExpired()) {
        // A pause longer than the lease, and this release came before any renewal noticed.
        lock.ranOut(this);
      }
      outcome = lock.released(this, markReleased());
      return outcome;
    }
  }

  /**
   * Gives the lease up but keeps every other acquirer out until {@code afterAcquiring} has passed
   * since this lease was acquired (ShedLock's "lock at least for"): a job scheduled on several
   * nodes then runs once per period even when it finishes early and the nodes' timers disagree a
   * little. Idempotent like {@link #release()}; never throws for the backend.
   *
   * <p>Algorithm:
   *
   * <ol>
   *   <li>Stop the watchdog and the expiry timer of this lease, refuse further extensions, and wait
   *       until every renewal or extension still out was answered, so that none lands after the one
   *       sent below.
   *   <li>Read the clock. If {@code afterAcquiring} has already passed since the acquire request
   *       was sent (the moment the lease's deadline counts from), {@link #release()} as usual.
   *   <li>Otherwise ask the backend to renew this grant for the time still missing, rounded up to
   *       whole milliseconds: shorter or longer than the lease's TTL, the server's lease then ends
   *       no earlier than that moment, and ends by itself then, because nobody renews it any more.
   * </ol>
   *
   * @param afterAcquiring how long after the acquisition the lease must at least last; zero or
   *     more, at most {@link LockConfig#MAX_TTL}
   * @return {@link ReleaseOutcome.KeptUntil} when the lease is kept until then; {@link
   *     ReleaseOutcome.Released} when the moment had passed and the lease was freed; {@link
   *     ReleaseOutcome.Lost} when the lease had already run out or passed to another holder; {@link
   *     ReleaseOutcome.Unknown} when the backend failed (the lease then ends at its TTL at the
   *     latest, maybe before the moment asked for)
   * @throws IllegalArgumentException for a negative or too long {@code afterAcquiring}
   */
  public ReleaseOutcome releaseNoEarlierThan(Duration afterAcquiring) {
    Objects.requireNonNull(afterAcquiring, "afterAcquiring");
    if (afterAcquiring.isNegative() || afterAcquiring.compareTo(LockConfig.MAX_TTL) > 0) {
      throw new IllegalArgumentException(
          "afterAcquiring must be between zero and "
              + LockConfig.MAX_TTL
              + ", got "
              + afterAcquiring
              + ": pass how long after the acquisition the lock must stay taken, e.g."
              + " Duration.ofMinutes(1) for a job scheduled every minute.");
    }
    synchronized (releasing) {
      if (outcome != null) {
        return outcome;
      }
      outcome = lock.keep(this, afterAcquiring);
      return outcome;
    }
  }

  /** Same as {@link #release()}. */
  @Override
  public void close() {
    release();
  }

  long acquiredAtNanos() {
    return acquiredAtNanos;
  }

  Object renewing() {
    return renewing;
  }

  LostLease.Cause lostCause() {
    return lostCause;
  }

  String lostReason() {
    return lostReason;
  }

  /**
   * A renewal or extension with {@code length}, sent at {@code sentNanos}, whose answer has not
   * come back yet. {@code shortestOverlap} is the shortest length of every other one out at any
   * moment while this one was: any of them may land on the server after this one, whatever the
   * order of the answers, and cut the lease to its own length.
   */
  static final class Flight {
    private final long number;
    private final long sentNanos;
    private final Duration length;
    private Duration shortestOverlap; // guarded by renewing
    private boolean shortened; // guarded by renewing
    private final boolean extension;

    private Flight(long number, long sentNanos, Duration length, boolean extension) {
      this.number = number;
      this.sentNanos = sentNanos;
      this.length = length;
      this.extension = extension;
    }

    Duration length() {
      return length;
    }

    /** True when sending it moved the deadline sooner (see {@link HeldLock#send}). */
    boolean shortened() {
      return shortened;
    }

    private void overlaps(Duration other) {
      if (shortestOverlap == null || other.compareTo(shortestOverlap) < 0) {
        shortestOverlap = other;
      }
    }
  }

  /** What a confirmed renewal did to the holder's view; see {@link #confirmed}. */
  enum Confirmed {
    /** It moved the deadline. */
    APPLIED,
    /** A renewal sent after it had already moved the deadline, counting this one as out. */
    SUPERSEDED,
    /** The lease was lost or released while it was out: nobody holds it. */
    NOT_HELD
  }

  /**
   * Registers a renewal or extension with {@code length} about to be sent, reading the clock for
   * its send time; {@code null} when the lease is no longer held or {@link #keepFromNowOn} stopped
   * renewals. Called under {@link #renewing()}.
   *
   * <ol>
   *   <li>Number it, and record its length as an overlap of every flight out and theirs as its own.
   *   <li>Whatever its answer, the server's lease now ends either where the holder counts it or
   *       {@code length} after this one lands, no sooner than {@code length} from now: the deadline
   *       becomes the sooner of the two (only an extension to a shorter length moves it), decided
   *       on the two ends themselves, not on two readings of the clock.
   * </ol>
   */
  Flight send(Duration length, boolean extension, LeaseClock clock) {
    if (!isHeld() || keeping) {
      return null;
    }
    Flight flight = new Flight(++lastSent, clock.nanoTime(), length, extension);
    for (Flight other : flights) {
      other.overlaps(length);
      flight.overlaps(other.length);
    }
    flights.add(flight);
    flight.shortened = endSooner(flight.sentNanos, length, clock);
    return flight;
  }

  /**
   * The server confirmed {@code flight}. The holder believes no more than the shortest of its
   * length, the length of every flight that overlapped it and that of every renewal whose answer
   * was lost, counted from its send time, because any of those may have landed after it. It sets
   * the deadline only when no flight sent after it has set it already: that one counted this flight
   * as out, so it already believes no more than this one's length. Called under {@link
   * #renewing()}.
   */
  Confirmed confirmed(Flight flight, LeaseClock clock) {
    answered(flight);
    if (!isHeld()) {
      return Confirmed.NOT_HELD;
    }
    if (flight.extension) {
      // Only an extension chooses the length. A watchdog renewal carries the length it read when
      // it was sent, which may predate an extension confirmed since: it must not set that back.
      setTtl(flight);
    }
    if (flight.number < deadlineSetBy) {
      return Confirmed.SUPERSEDED;
    }
    deadlineSetBy = flight.number;
    Duration believable = believable(flight.length);
    if (flight.shortestOverlap != null && flight.shortestOverlap.compareTo(believable) < 0) {
      believable = flight.shortestOverlap;
    }
    setDeadline(flight.sentNanos, believable, clock);
    return Confirmed.APPLIED;
  }

  /**
   * The server refused {@code flight} (the lease is lost, which the caller reports). Called under
   * {@link #renewing()}.
   */
  void refused(Flight flight) {
    answered(flight);
  }

  /**
   * {@code flight}'s answer never came: it may still reach the server, later than any renewal sent
   * after it (a pooled connection stuck in retransmission), and then set the lease to end its
   * length after it lands. So every later confirmation believes no more than that length. Called
   * under {@link #renewing()}.
   */
  void unanswered(Flight flight) {
    answered(flight);
    if (shortestUnanswered == null || flight.length.compareTo(shortestUnanswered) < 0) {
      shortestUnanswered = flight.length;
    }
  }

  /**
   * An extension whose answer never came: {@link #unanswered}, the lease renewed with its length
   * from now on (as a confirmed one would be), and the deadline the sooner of where it was and the
   * extension's own end (already so since it was sent, unless a confirmation moved it since).
   * Called under {@link #renewing()}.
   */
  void extensionUnanswered(Flight flight, LeaseClock clock) {
    unanswered(flight);
    if (isHeld()) {
      setTtl(flight);
      endSooner(flight.sentNanos, flight.length, clock);
    }
  }

  /**
   * Stops renewals for good ({@link #send} answers {@code null} from now on) and waits until every
   * renewal out has been answered, so that none lands after the one {@link #releaseNoEarlierThan}
   * sends. Called under {@link #renewing()}, which the wait gives up. An interrupt does not end the
   * wait (the flag is set again after it): a renewal answered after the keep would find the lease
   * no longer held and release it, undoing the keep; every renewal out ends within its backend
   * call's timeout.
   */
  void keepFromNowOn() {
    keeping = true;
    boolean interrupted = false;
    while (!flights.isEmpty()) {
      try {
        renewing.wait();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * What the holder may believe of a renewal with {@code length} that the server confirmed: no more
   * than the shortest renewal whose answer was lost, which may land after it and cut the lease to
   * its own length. Equal lengths (the watchdog's, without extensions) change nothing. Called under
   * {@link #renewing()}.
   */
  Duration believable(Duration length) {
    Duration shortest = shortestUnanswered;
    return shortest != null && shortest.compareTo(length) < 0 ? shortest : length;
  }

  private void answered(Flight flight) {
    flights.remove(flight);
    if (flights.isEmpty()) {
      renewing.notifyAll(); // keepFromNowOn waits for this
    }
  }

  private void setTtl(Flight flight) {
    if (flight.number > ttlSetBy) {
      ttlSetBy = flight.number;
      ttl = flight.length;
    }
  }

  /**
   * Moves the deadline to {@code length} after {@code startNanos} if that ends sooner; compares the
   * two ends as differences of clock readings, without reading the clock.
   */
  private boolean endSooner(long startNanos, Duration length, LeaseClock clock) {
    long laterBy =
        (startNanos - deadlineStartNanos) + (length.toNanos() - deadline.leaseDuration().toNanos());
    if (laterBy >= 0) {
      return false;
    }
    setDeadline(startNanos, length, clock);
    return true;
  }

  private void setDeadline(long startNanos, Duration length, LeaseClock clock) {
    deadlineStartNanos = startNanos;
    deadline = Deadline.forHolder(clock, startNanos, length);
  }

  /** Marks the lease released (or lost and released) and returns the state it had before. */
  State markReleased() {
    return state.getAndUpdate(
        s ->
            switch (s) {
              case HELD -> State.RELEASED;
              case LOST -> State.LOST_AND_RELEASED;
              default -> s;
            });
  }

  /** Records that a release found the lease gone on the backend; no callback (the work is over). */
  void lostAtRelease(LostLease.Cause cause, String reason) {
    this.lostCause = cause;
    this.lostReason = reason;
    state.compareAndSet(State.RELEASED, State.LOST_AND_RELEASED);
  }

  /** Marks the lease lost once and tells the facade; later calls do nothing. */
  void lose(LostLease.Cause cause, String reason) {
    if (state.compareAndSet(State.HELD, State.LOST)) {
      this.lostCause = cause;
      this.lostReason = reason;
      lock.lost(this, cause, reason);
    }
  }

  String lostMessage() {
    return "Lease on lock \""
        + name
        + "\" (token "
        + token.value()
        + ") was lost: "
        + lostReason
        + ". Stop writing; re-acquire and re-read before trying again.";
  }

  @Override
  public String toString() {
    return "HeldLock["
        + name
        + ", "
        + owner
        + ", token="
        + token.value()
        + ", "
        + state.get()
        + ", "
        + deadline
        + "]";
  }
}
