package dev.nolock.patterns;

import io.vavr.control.Option;
import java.time.Duration;

/**
 * The one primitive a fenced-lock backend implements: a lease per lock name that hands out a
 * strictly increasing {@link FencingToken}. Waiting, backoff, renewal scheduling, validation and
 * metrics are written once, in the {@code nolock-fenced-lock} facade; a backend does storage only.
 *
 * <p>Every backend guarantees, judged on the <em>server's</em> clock:
 *
 * <ol>
 *   <li>{@link #tryAcquire} grants a lease only when the name has no unexpired lease, and every
 *       grant of a name gets a token higher than every earlier grant of that name, including after
 *       a release or an expiry (a release never resets the counter).
 *   <li>{@link #renew} is a compare-and-swap on the token: it extends the lease only while the
 *       stored lease is still {@code (owner, token)} and unexpired, so it can never extend a lease
 *       that another holder now owns. It is never a blind TTL bump. It sets the lease to end the
 *       given TTL from now, shorter or longer than before.
 *   <li>{@link #release} frees the lease only while it is still {@code (owner, token)}; it is
 *       idempotent, and a stale release never frees the next holder's lease.
 *   <li>{@link #holder} reports the unexpired lease's owner and token, read-only; it changes
 *       nothing and grants nothing.
 * </ol>
 *
 * <p>An {@code owner} names one grant, not one process: the facade passes the process's owner plus
 * a nonce per acquisition ({@link GrantOwner}), so two grants of one process never share an owner
 * and a renew or release by one can never act on the other's lease. An acquire by the owner that
 * already holds the lease (a caller's retry after "unknown") grants nothing new: the backend
 * refuses it or returns that grant's own token.
 *
 * <p>Inputs reach a backend already validated by the facade. Losing a race is a return value; a
 * failure of the server is a {@link BackendUnavailableException}; a refusal a retry would repeat (a
 * missing table, a missing privilege) is an {@link IllegalStateException} that says what to fix.
 */
public interface LockBackend {

  /**
   * Takes the lease on {@code name} for {@code ttl} if nobody holds an unexpired one.
   *
   * @return the new grant's token, or empty when another holder has the lease
   */
  Option<FencingToken> tryAcquire(String name, String owner, Duration ttl);

  /**
   * Sets the lease to end {@code ttl} from now (server time) if it is still this holder's. The new
   * length replaces the old one whether it is shorter or longer than the TTL the lease was acquired
   * or last renewed with: a shorter {@code ttl} ends the lease sooner (a holder giving time back,
   * or keeping the lease only until a chosen moment), a longer one keeps it past its first TTL. A
   * backend may keep the lease longer than {@code ttl} (rounding up to its unit, or to a minimum
   * lease), never shorter, because the holder counts {@code ttl} from before it sent the call.
   *
   * @return false when the lease expired or now belongs to someone else: the holder has lost it
   */
  boolean renew(String name, String owner, FencingToken token, Duration ttl);

  /**
   * Frees the lease if it is still this holder's.
   *
   * @return true when this call freed it; false when it was already free, expired or someone else's
   *     (no other holder's lease changes; a backend whose store keeps no expiry may still mark an
   *     expired lease of this holder free, so that the next holder need not wait for it)
   */
  boolean release(String name, String owner, FencingToken token);

  /**
   * Who holds an unexpired lease on {@code name} now, as this backend judges expiry (the server's
   * clock, or for a backend without one the contender's observation rule). For observers only: the
   * answer may be stale when it arrives, so it must never decide whether a write goes out. A
   * backend that can show more of the lease returns an {@link ObservedLease} from its own {@code
   * inspect(name)}, whose {@link ObservedLease#liveHolder} is this answer.
   *
   * @return the holder and its token, or empty when nobody holds an unexpired lease
   */
  Option<LeaseHolder> holder(String name);
}
