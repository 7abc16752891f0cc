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
  private final Duration ttl;
  private final long acquiredAtNanos;
  private final AtomicReference<State> state = new AtomicReference<>(State.HELD);
  private volatile Deadline deadline;
  private volatile String lostReason;

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

  /** When the lease ends as this holder measures it; moves forward with each renewal. */
  public Deadline deadline() {
    return deadline;
  }

  /** The TTL the lease was acquired and is renewed with. */
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
              + "\" was created for EFFICIENCY: it hands out no fencing token because"
              + " duplicate work under it must be harmless. If it guards writes a second holder"
              + " would corrupt, create it with LockConfig.custom(LockPurpose.CORRECTNESS) and send"
              + " each write with lease() through a Fence.");
    }
    return new Lease(name, owner, token, deadline);
  }

  /**
   * Call immediately before each protected write. Passes only while the lease is held and {@code
   * remaining - safetyMargin > expectedWriteTime}.
   *
   * @throws LeaseLostException when the write must not be sent: stop writing, re-acquire
   * @throws IllegalStateException when this lock was already released
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
    Deadline now = deadline;
    if (now.hasExpired()) {
      lose("the lease ran out before a renewal succeeded");
      throw new LeaseLostException(lostMessage());
    }
    now.checkPointOfNoReturn(lock.config().safetyMargin(), expectedWriteTime);
  }

  /**
   * Releases the lease if it is still this holder's; idempotent. Never throws for the backend: a
   * release that fails or loses its answer is logged and counted ({@code nolock.release.failures})
   * and the lease ends at its TTL, so that closing the lock never turns finished work into a
   * failure that a caller would retry.
   */
  public void release() {
    if (state.get() == State.HELD && deadline.hasExpired()) {
      // A pause longer than the lease, and this release came before any renewal noticed.
      lose("the lease ran out before a renewal succeeded");
    }
    State before =
        state.getAndUpdate(
            s ->
                switch (s) {
                  case HELD -> State.RELEASED;
                  case LOST -> State.LOST_AND_RELEASED;
                  default -> s;
                });
    if (before == State.RELEASED || before == State.LOST_AND_RELEASED) {
      return;
    }
    lock.released(this, before == State.HELD);
  }

  /** Same as {@link #release()}. */
  @Override
  public void close() {
    release();
  }

  FencingToken token() {
    return token;
  }

  long acquiredAtNanos() {
    return acquiredAtNanos;
  }

  /** A renewal that was sent at {@code deadline}'s start succeeded. */
  void renewed(Deadline renewed) {
    if (isHeld()) {
      this.deadline = renewed;
    }
  }

  /** Marks the lease lost once and tells the facade; later calls do nothing. */
  void lose(String reason) {
    if (state.compareAndSet(State.HELD, State.LOST)) {
      this.lostReason = reason;
      lock.lost(this, reason);
    }
  }

  private String lostMessage() {
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
