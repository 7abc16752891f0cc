package dev.nolock.idempotency.internal;

/**
 * The checks that make idempotency keys safe, and the bound that keeps duplicates from holding
 * every thread, switchable only so that negative-control tests can show each one is what catches
 * its failure. Production code always uses {@link #ALL}; the public API offers no way to switch
 * them off.
 *
 * @param fingerprintCheck refuse a key reused with another request's fingerprint (off: the other
 *     request is answered with the first one's stored result)
 * @param attemptCheck make every recovery-point and completion update conditional on the attempt
 *     token and the in-progress state (off: a stale attempt's effects commit next to the retry's)
 * @param waitBound let at most {@code maxWaitingWhileInProgress} calls wait for a key in progress
 *     (off: every duplicate waits, each holding its thread)
 */
public record Safeguards(boolean fingerprintCheck, boolean attemptCheck, boolean waitBound) {

  public static final Safeguards ALL = new Safeguards(true, true, true);

  /** The two checks as given, with the wait bound on. */
  public Safeguards(boolean fingerprintCheck, boolean attemptCheck) {
    this(fingerprintCheck, attemptCheck, true);
  }
}
