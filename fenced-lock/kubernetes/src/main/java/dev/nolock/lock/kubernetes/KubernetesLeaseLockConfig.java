package dev.nolock.lock.kubernetes;

import dev.nolock.lock.kubernetes.internal.KubernetesNames;
import dev.nolock.patterns.LeaseClock;
import java.time.Clock;

/**
 * Immutable settings of a {@link KubernetesLeaseLockBackend}, built with {@link #custom()}; each
 * setter validates at once.
 *
 * <p>The namespace has no default: {@link Builder#build()} refuses a config whose namespace was not
 * named, so that Leases never land in a namespace shared with other applications (such as {@code
 * default}) by omission, where whoever may read or write Leases there could read the holders'
 * identities or take the locks. Give the application a namespace of its own, and grant its service
 * account access to its Leases only ({@code rbac.yaml}).
 *
 * <p>Defaults of the rest: Lease name prefix {@value #DEFAULT_PREFIX} (the Lease of lock {@code
 * "invoice-42"} is {@code nolock-invoice-42}; never empty), the system {@link LeaseClock}, the UTC
 * system wall clock, and {@value #DEFAULT_REMEMBERED_NAMES} remembered lock names.
 */
public final class KubernetesLeaseLockConfig {

  public static final String DEFAULT_PREFIX = "nolock-";

  /** How many lock names' highest tokens a backend instance remembers by default. */
  public static final int DEFAULT_REMEMBERED_NAMES = 10_000;

  /** The largest {@link Builder#rememberedNames} accepted. */
  public static final int MAX_REMEMBERED_NAMES = 10_000_000;

  private final String namespace;
  private final String leaseNamePrefix;
  private final LeaseClock clock;
  private final Clock wallClock;
  private final int rememberedNames;

  private KubernetesLeaseLockConfig(Builder b) {
    this.namespace = b.namespace;
    this.leaseNamePrefix = b.leaseNamePrefix;
    this.clock = b.clock;
    this.wallClock = b.wallClock;
    this.rememberedNames = b.rememberedNames;
  }

  /** A builder that starts from the defaults, without a namespace: name one before building. */
  public static Builder custom() {
    return new Builder();
  }

  /** The namespace the Lease objects live in. */
  public String namespace() {
    return namespace;
  }

  /** Put in front of every lock name to form the Lease name; never empty. */
  public String leaseNamePrefix() {
    return leaseNamePrefix;
  }

  /**
   * The name of the Lease that holds lock {@code lockName}: the prefix followed by the lock name,
   * which must form a DNS-1123 subdomain (lower-case letters, digits, '-' and '.', at most 253
   * characters). Names are not mapped: a name that does not fit is refused with an {@link
   * IllegalArgumentException}, so that two lock names can never share a Lease.
   */
  public String leaseName(String lockName) {
    present(lockName, "lockName");
    return KubernetesNames.requireLeaseName(lockName, leaseNamePrefix + lockName);
  }

  /**
   * The monotonic clock on which this backend measures how long it has watched another holder's
   * Lease unchanged, and its own grants' deadlines. Give the {@code FencedLock} or {@code
   * LeaderElector} on this backend the same clock.
   */
  public LeaseClock clock() {
    return clock;
  }

  /**
   * The wall clock for the {@code acquireTime} and {@code renewTime} the backend writes into the
   * Lease, for people and tools that read it ({@code kubectl get lease -o yaml}). The backend never
   * reads those fields back: no decision depends on the wall clock.
   */
  public Clock wallClock() {
    return wallClock;
  }

  /**
   * How many lock names the backend remembers the highest {@code leaseTransitions} of (and the
   * Lease's uid), by which it notices a Lease that was deleted or re-created. The least recently
   * used name is forgotten beyond this number; for a forgotten name the backend behaves like a
   * freshly started process, which cannot tell a re-created Lease from a new one.
   */
  public int rememberedNames() {
    return rememberedNames;
  }

  @Override
  public String toString() {
    return "KubernetesLeaseLockConfig[namespace="
        + namespace
        + ", leaseNamePrefix="
        + leaseNamePrefix
        + ", rememberedNames="
        + rememberedNames
        + "]";
  }

  /** Builds a {@link KubernetesLeaseLockConfig}. */
  public static final class Builder {
    private String namespace;
    private String leaseNamePrefix = DEFAULT_PREFIX;
    private LeaseClock clock = LeaseClock.system();
    private Clock wallClock = Clock.systemUTC();
    private int rememberedNames = DEFAULT_REMEMBERED_NAMES;

    private Builder() {}

    /**
     * The namespace the Leases live in, required: a DNS-1123 label, e.g. {@code "billing"}. Use one
     * dedicated to the application (in a pod, its own, from the downward API), whose Leases only
     * its service account may read and write.
     */
    public Builder namespace(String namespace) {
      this.namespace = KubernetesNames.requireNamespace(namespace);
      return this;
    }

    /**
     * Lower-case letters, digits, '-' and '.', starting with a letter or digit, never empty;
     * default {@value #DEFAULT_PREFIX}. The prefix keeps these Leases apart from those of other
     * leader electors in the namespace (client-go's do not bump {@code leaseTransitions} on every
     * acquisition, so they must not share a Lease with this backend), and names them for an RBAC
     * rule's {@code resourceNames}.
     */
    public Builder leaseNamePrefix(String leaseNamePrefix) {
      this.leaseNamePrefix = KubernetesNames.requirePrefix(leaseNamePrefix);
      return this;
    }

    /** The monotonic clock; a {@code ManualLeaseClock} in tests. */
    public Builder clock(LeaseClock clock) {
      this.clock = present(clock, "clock");
      return this;
    }

    /** The wall clock for the informational {@code acquireTime} and {@code renewTime}. */
    public Builder wallClock(Clock wallClock) {
      this.wallClock = present(wallClock, "wallClock");
      return this;
    }

    /**
     * How many lock names' highest tokens to remember, least recently used forgotten first; from 1
     * to {@value #MAX_REMEMBERED_NAMES}, default {@value #DEFAULT_REMEMBERED_NAMES}. Each takes a
     * few hundred bytes (the name, a uid and a number). Raise it above the number of lock names a
     * process uses, so that none is forgotten (see {@link
     * KubernetesLeaseLockConfig#rememberedNames}).
     */
    public Builder rememberedNames(int rememberedNames) {
      if (rememberedNames < 1 || rememberedNames > MAX_REMEMBERED_NAMES) {
        throw new IllegalArgumentException(
            "rememberedNames must be from 1 to "
                + MAX_REMEMBERED_NAMES
                + ", got "
                + rememberedNames
                + ": pass at least the number of lock names one process uses (default "
                + DEFAULT_REMEMBERED_NAMES
                + ").");
      }
      this.rememberedNames = rememberedNames;
      return this;
    }

    /**
     * The config, which needs a namespace.
     *
     * @throws IllegalArgumentException when no namespace was named
     */
    public KubernetesLeaseLockConfig build() {
      if (namespace == null) {
        throw new IllegalArgumentException(
            "KubernetesLeaseLockConfig has no namespace: call .namespace(...) with the namespace"
                + " dedicated to this application's Leases, e.g. .namespace(\"billing\"), or in a"
                + " pod its own, System.getenv(\"POD_NAMESPACE\") set from the downward API"
                + " (fieldRef metadata.namespace). There is no default, so that Leases never land"
                + " in a namespace shared with others, such as \"default\", by omission.");
      }
      return new KubernetesLeaseLockConfig(this);
    }
  }

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming the setting: a configuration error
   * is the caller's to fix, never a {@link NullPointerException}.
   */
  private static <V> V present(V value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass a value, or leave the setting out to keep its default.");
    }
    return value;
  }
}
