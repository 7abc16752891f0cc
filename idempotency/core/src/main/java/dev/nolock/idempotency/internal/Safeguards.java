package dev.nolock.idempotency.internal;

/**
 * The two checks that make idempotency keys safe, switchable only so that negative-control tests
 * can show each one is what catches its failure. Production code always uses {@link #ALL}; the
 * public API offers no way to switch them off.
 *
 * @param fingerprintCheck refuse a key reused with another request's fingerprint (off: the other
 *     request is answered with the first one's stored result)
 * @param attemptCheck make every recovery-point and completion update conditional on the attempt
 *     token and the in-progress state (off: a stale attempt's effects commit next to the retry's)
 */
public record Safeguards(boolean fingerprintCheck, boolean attemptCheck) {

  public static final Safeguards ALL = new Safeguards(true, true);
}
