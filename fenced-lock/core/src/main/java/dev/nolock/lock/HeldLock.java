package dev.nolock.lock;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseLostException;
import java.time.Duration;
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

  /** Held while a renewal or extension is out, so that their answers apply in the order sent. */
  private final Object renewing = new Object();

  /** Held while releasing, so that a second release waits for the first one's outcome. */
  private final Object releasing = new Object();

  private volatile Duration ttl;
  // Guarded by renewing(): the shortest length of a renewal whose answer was lost, or null.
  private Duration shortestUnanswered;
  private volatile Deadline deadline;
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
   * remaining - safetyMargin > expectedWriteTime}.
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
    now.checkPointOfNoReturn(lock.config().safetyMargin(), expectedWriteTime);
  }

  /**
   * Sets the lease to end {@code ttl} from now, shorter or longer than before, and renews it with
   * {@code ttl} from then on (with auto-renewal on, every {@link LockConfig#renewalInterval()} or
   * {@code ttl/3}). A job without a watchdog calls this to ask for more time; one that knows it
   * needs less gives time back.
   *
   * <p>Algorithm: read the clock, ask the backend to renew this grant with {@code ttl} (a
   * compare-and-swap on owner and token, see {@link dev.nolock.patterns.LockBackend#renew}), and on
   * success move the deadline to that reading plus {@code ttl}. When the call fails its outcome is
   * unknown: the server's lease now ends either where it did or {@code ttl} after the call, so the
   * deadline becomes the sooner of the two, and the exception is rethrown.
   *
   * @throws LeaseLostException when the backend refused: the lease had expired or someone else has
   *     it (it is now lost)
   * @throws IllegalStateException when this lock was already released
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
   *   <li>Stop the watchdog and the expiry timer of this lease.
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
   * A renewal or extension with {@code length} whose answer never came: it may still reach the
   * server, later than any renewal sent after it (a pooled connection stuck in retransmission), and
   * then set the lease to end {@code length} after it lands. Called under {@link #renewing()}.
   */
  void unanswered(Duration length) {
    if (shortestUnanswered == null || length.compareTo(shortestUnanswered) < 0) {
      shortestUnanswered = length;
    }
  }

  /**
   * What the holder may believe of a renewal with {@code length} that the server confirmed: no more
   * than the shortest renewal still unanswered, which may land after it and cut the lease to its
   * own length. Equal lengths (the watchdog's, without extensions) change nothing.
   */
  Duration believable(Duration length) {
    Duration shortest = shortestUnanswered;
    return shortest != null && shortest.compareTo(length) < 0 ? shortest : length;
  }

  /** A renewal or extension with {@code renewedTtl} that was sent at {@code renewed}'s start. */
  void renewed(Duration renewedTtl, Deadline renewed) {
    if (isHeld()) {
      this.ttl = renewedTtl;
      this.deadline = renewed;
    }
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
