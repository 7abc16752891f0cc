package dev.nolock.idempotency.internal;

import io.micrometer.core.instrument.MeterRegistry;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The counters of each scope one executor has seen, for at most {@code maxScopes} scopes; scopes
 * beyond those share the counters tagged {@code scope=}{@link IdempotencyMetrics#OVERFLOW_SCOPE}.
 *
 * <p>Why: each scope is a tag value, and each tag value a series of every counter of {@link
 * IdempotencyMetrics} that the registry, and the metrics backend behind it, keep for good. Scopes
 * are meant to name operations (a handful per application); a caller that passes a per-request
 * value instead (a tenant, a user, anything from the request) would otherwise grow the registry
 * without bound, one series per request.
 *
 * <ol>
 *   <li>A scope that has its counters gets them (a read of a concurrent map, no lock).
 *   <li>A new scope, while fewer than {@code maxScopes} have counters, gets counters of its own,
 *       registered now.
 *   <li>Any other scope gets the overflow counters. The first time, one WARN names the instance,
 *       the cap and the fix, but not the scope: it may be a value an attacker chose.
 * </ol>
 *
 * The cap never fails a call: metering is not a reason to refuse a request. Without a registry
 * ({@link #unmetered}) nothing is recorded, so there is nothing to cap: every scope shares one set
 * of counters that keep nothing, and nothing is logged. Thread-safe.
 */
final class ScopeMeters {

  private static final Logger LOG = LoggerFactory.getLogger(ScopeMeters.class);

  private final MeterRegistry registry;
  private final String instanceName;
  private final int maxScopes;
  private final Map<String, IdempotencyMetrics> metered = new ConcurrentHashMap<>();

  /** Set once the cap is reached; from then on no scope is added, so no lock is needed. */
  private volatile IdempotencyMetrics overflow;

  ScopeMeters(MeterRegistry registry, String instanceName, int maxScopes) {
    this.registry = registry;
    this.instanceName = instanceName;
    this.maxScopes = maxScopes;
  }

  /**
   * For an executor without a registry: {@code keepsNothing} (a registry that records nothing) gets
   * one set of counters, shared by every scope, so neither meters nor scopes accumulate, and no
   * WARN names a metrics setting the caller never made.
   */
  static ScopeMeters unmetered(MeterRegistry keepsNothing, String instanceName) {
    ScopeMeters none = new ScopeMeters(keepsNothing, instanceName, 0);
    none.overflow = new IdempotencyMetrics(keepsNothing, instanceName, "");
    return none;
  }

  IdempotencyMetrics forScope(String scope) {
    IdempotencyMetrics counters = metered.get(scope);
    if (counters != null) {
      return counters;
    }
    IdempotencyMetrics full = overflow;
    if (full != null) {
      return full;
    }
    synchronized (this) {
      counters = metered.get(scope);
      if (counters != null) {
        return counters;
      }
      if (metered.size() < maxScopes) {
        counters = new IdempotencyMetrics(registry, instanceName, scope);
        metered.put(scope, counters);
        return counters;
      }
      if (overflow == null) {
        overflow =
            new IdempotencyMetrics(registry, instanceName, IdempotencyMetrics.OVERFLOW_SCOPE);
        LOG.warn(
            "IdempotencyKeys with metrics name=\"{}\" has seen more than {} distinct scopes; the"
                + " counters of further scopes are summed under the scope tag \"{}\". A scope"
                + " should name an operation (\"payments.create\"), never a per-request value"
                + " (a user, a tenant, an id): pass the operation as the scope and put the rest"
                + " into the key or fingerprint. If you really have more operations, raise"
                + " IdempotencyConfig.Builder#maxMeteredScopes. Every call still runs as usual.",
            instanceName,
            maxScopes,
            IdempotencyMetrics.OVERFLOW_SCOPE);
      }
      return overflow;
    }
  }
}
