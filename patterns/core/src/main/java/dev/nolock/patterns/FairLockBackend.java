package dev.nolock.patterns;

import io.vavr.control.Option;
import java.time.Duration;

/**
 * A {@link LockBackend} that can also queue the callers waiting for a lease and wake them when it
 * is released, so that a waiting {@code FencedLock.acquire} is served roughly in arrival order and
 * learns of a release in one notification instead of its next poll. Everything {@link LockBackend}
 * guarantees holds unchanged: the queue decides only <em>who may ask</em>, never whether a grant is
 * exclusive, which stays with the lease and its token.
 *
 * <p>The queue, judged on the backend's clock:
 *
 * <ol>
 *   <li>A waiter's place is kept for the {@code place} duration given with each attempt, and each
 *       attempt renews it. A waiter that stops asking (its process died, or it paused longer than
 *       that) loses its place when the duration runs out, so it can block the others for no longer
 *       than that; if it comes back, it queues again at the back.
 *   <li>{@link #tryAcquireInTurn} grants only when {@link LockBackend#tryAcquire} would and no
 *       waiter with an unexpired place that joined before this one is out of patience: each waiter
 *       lets newer callers go ahead of it for the patience it joined with, and no longer. A caller
 *       with no place yet counts as the last. With zero patience everywhere that is strict arrival
 *       order. It joins the queue when it is not granted and leaves it when it is.
 *   <li>{@link LockBackend#tryAcquire} does not look at the queue: a caller that asks once can take
 *       a free lease ahead of the waiters.
 * </ol>
 *
 * <p>Wake-ups are a hint, never a grant: one can be lost (a dropped connection, a listener not yet
 * started) or arrive when nothing changed, so a waiter still polls, less often.
 */
public interface FairLockBackend extends LockBackend {

  /**
   * Takes the lease on {@code name} for {@code ttl} if nobody holds an unexpired one and it is
   * {@code waiter}'s turn; otherwise keeps {@code waiter}'s place in the queue (joining at the back
   * when it has none, or an expired one) for {@code place} from now.
   *
   * @param waiter the identity of one waiting call, unique per call (not per process)
   * @param patience how long, from joining, this waiter lets newer callers go ahead of it
   * @return the new grant's token, or empty when the lease is held or another waiter is ahead
   */
  Option<FencingToken> tryAcquireInTurn(
      String name, String owner, Duration ttl, String waiter, Duration place, Duration patience);

  /**
   * Gives up {@code waiter}'s place, if it still has one, and wakes the others; idempotent. Called
   * by a waiter that gave up; a waiter that cannot reach the backend leaves its place to expire.
   */
  void leaveQueue(String name, String waiter);

  /**
   * Calls {@code wake} when it may be {@code waiter}'s turn on {@code name}: the lease was freed
   * while {@code waiter} was first in the queue, or the waiters ahead of it left. Until the
   * returned subscription is closed. {@code wake} runs on the backend's thread and must return at
   * once. Only the first waiter is woken, so that a release costs one attempt, not one per waiter.
   * A backend that cannot push returns a subscription that never wakes.
   */
  Subscription onRelease(String name, String waiter, Runnable wake);

  /**
   * Whether this backend can wake its waiters now: listening is on and not found broken, and the
   * queue is usable. When it cannot, a caller waits without a place and polls: a waiter first in
   * line that nobody wakes would leave a freed lock idle for as long as it sleeps.
   */
  boolean wakesWaiters();

  /** An {@link #onRelease} registration; closing it is idempotent. */
  interface Subscription extends AutoCloseable {

    /** A subscription that never wakes, from a backend that cannot push. */
    Subscription NEVER = () -> {};

    @Override
    void close();
  }
}
