package dev.nolock.idempotency.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import java.lang.ref.WeakReference;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.function.ToDoubleFunction;

/**
 * The counters of one scope, tagged {@code component="idempotency"}, {@code name=<instance name>}
 * and {@code scope=<scope>}, never with a key. Registered when the scope is first used, so a
 * dashboard sees zeros from then on; past the configured number of scopes, the scopes share the
 * counters tagged {@link #OVERFLOW_SCOPE} (see {@code ScopeMeters}). The abandoned-keys gauge
 * belongs to the table (all scopes), not a scope: see {@link #registerAbandonedKeys}.
 */
public final class IdempotencyMetrics {

  public static final String COMPONENT = "idempotency";

  /** The counters' tag for the scope (a handful of values per application, never a key). */
  public static final String SCOPE_TAG = "scope";

  /**
   * The scope tag of the counters shared by the scopes beyond {@link
   * dev.nolock.idempotency.IdempotencyConfig#maxMeteredScopes()}. Plain (no spaces or punctuation
   * that a metrics backend treats specially, such as Graphite's {@code ';'}); no scope can be it,
   * because {@code IdempotencyKeys} refuses scopes that start with {@code '_'}.
   */
  public static final String OVERFLOW_SCOPE = "_overflow";

  /**
   * The abandoned-keys gauges' states, per registry (held weakly: a registry that is dropped takes
   * its gauges with it) and name.
   */
  private static final Map<MeterRegistry, Map<String, NewestSampler<?>>> ABANDONED_GAUGES =
      new WeakHashMap<>();

  private final Counter firstRuns;
  private final Counter replays;
  private final Counter inProgress;
  private final Counter fingerprintMismatches;
  private final Counter takeovers;
  private final Counter staleAttempts;
  private final Counter releases;
  private final Counter waitsRefused;

  public IdempotencyMetrics(MeterRegistry registry, String instanceName, String scope) {
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            COMPONENT,
            CoordinationMetrics.NAME_TAG,
            instanceName,
            SCOPE_TAG,
            scope);
    this.firstRuns =
        counter(registry, tags, "first.runs", "Keys seen for the first time; the action ran");
    this.replays = counter(registry, tags, "replays", "Repeats answered with the stored result");
    this.inProgress =
        counter(registry, tags, "in.progress", "Calls answered RequestInProgress (HTTP 409)");
    this.fingerprintMismatches =
        counter(
            registry,
            tags,
            "fingerprint.mismatches",
            "Keys reused with a different request (HTTP 422)");
    this.takeovers =
        counter(registry, tags, "takeovers", "Attempts that took over a key whose lease had ended");
    this.staleAttempts =
        counter(
            registry,
            tags,
            "stale.attempts",
            "Attempts whose phase was rolled back because a newer attempt held the key");
    this.releases =
        counter(registry, tags, "releases", "Keys released for a retry after a retryable failure");
    this.waitsRefused =
        counter(
            registry,
            tags,
            "waits.refused",
            "Calls that found their key in progress and answered at once, without waiting,"
                + " because maxWaitingWhileInProgress calls were waiting already");
  }

  /**
   * Registers {@code nolock.idempotency.abandoned.keys}, tagged {@code component="idempotency"} and
   * {@code name=<name>} (the configured metrics name, by default the table), read through {@code
   * count} applied to {@code sampler} on every read of the gauge.
   *
   * <p>One gauge per registry and name. It reads the sampler registered <em>last</em> with that
   * name whose owner is still reachable: a component restarted on a fresh pool replaces the old
   * one, whose closed pool would otherwise make the gauge read NaN for good. Samplers are held
   * weakly, so the registry (which keeps the gauge for the life of the JVM) pins neither an old
   * instance nor its pool; with none left reachable the gauge reads NaN. Instances on different
   * databases must therefore be registered under different names, or the gauge shows only the
   * newest one's table.
   *
   * @param count reads the sampler; must not capture it (that would hold it strongly)
   * @return true when an earlier, still reachable sampler with this name is no longer read
   */
  public static <S> boolean registerAbandonedKeys(
      MeterRegistry registry, String name, S sampler, ToDoubleFunction<S> count) {
    NewestSampler<S> newest;
    boolean replaced;
    synchronized (ABANDONED_GAUGES) {
      @SuppressWarnings("unchecked")
      NewestSampler<S> existing =
          (NewestSampler<S>)
              ABANDONED_GAUGES
                  .computeIfAbsent(registry, r -> new HashMap<>())
                  .computeIfAbsent(name, n -> new NewestSampler<>(count));
      newest = existing;
      replaced = newest.add(sampler);
    }
    // Registered (again) on every call: a no-op while the gauge exists, and a re-registration with
    // the same state if someone removed it from the registry.
    Gauge.builder("nolock.idempotency.abandoned.keys", newest, NewestSampler::read)
        .description(
            "In-progress keys past their first phase, no longer leased, whose retention has run"
                + " out: kept (never purged) until completed or forgotten")
        .tags(CoordinationMetrics.COMPONENT_TAG, COMPONENT, CoordinationMetrics.NAME_TAG, name)
        .strongReference(true)
        .register(registry);
    return replaced;
  }

  /**
   * The samplers registered under one gauge, newest last, each held weakly. Micrometer keeps the
   * state of the gauge registered first and ignores later ones, so the gauge's state is this
   * holder, shared by every registration with the same registry and name.
   */
  private static final class NewestSampler<S> {
    private final ToDoubleFunction<S> count;
    private final Deque<WeakReference<S>> samplers = new ArrayDeque<>();

    NewestSampler(ToDoubleFunction<S> count) {
      this.count = count;
    }

    /** Adds the newest sampler; true when an earlier one was still reachable. */
    synchronized boolean add(S sampler) {
      samplers.removeIf(ref -> ref.get() == null);
      boolean replaced = !samplers.isEmpty();
      samplers.addLast(new WeakReference<>(sampler));
      return replaced;
    }

    synchronized S newest() {
      for (Iterator<WeakReference<S>> it = samplers.descendingIterator(); it.hasNext(); ) {
        S sampler = it.next().get();
        if (sampler != null) {
          return sampler;
        }
        it.remove();
      }
      return null;
    }

    double read() {
      S sampler = newest(); // outside the lock: the count is a query
      return sampler == null ? Double.NaN : count.applyAsDouble(sampler);
    }
  }

  private static Counter counter(MeterRegistry registry, Tags tags, String name, String help) {
    return Counter.builder("nolock.idempotency." + name)
        .description(help)
        .tags(tags)
        .register(registry);
  }

  public void firstRun() {
    firstRuns.increment();
  }

  public void replay() {
    replays.increment();
  }

  public void inProgress() {
    inProgress.increment();
  }

  public void fingerprintMismatch() {
    fingerprintMismatches.increment();
  }

  public void takeover() {
    takeovers.increment();
  }

  public void staleAttempt() {
    staleAttempts.increment();
  }

  public void release() {
    releases.increment();
  }

  public void waitRefused() {
    waitsRefused.increment();
  }
}
