package dev.nolock.lock.kubernetes;

import dev.nolock.lock.ObservedLeases;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.ObservedLease;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseSpec;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link LockBackend} on Kubernetes {@code coordination.k8s.io/v1} {@code Lease} objects, one per
 * lock name, that judges expiry the way client-go does (never by comparing {@code renewTime} with a
 * local clock) and hands out {@code spec.leaseTransitions} as the {@link FencingToken}.
 *
 * <h2>The Lease</h2>
 *
 * Name {@code <prefix><lock name>} in the configured namespace ({@link
 * KubernetesLeaseLockConfig#leaseName}). Fields written: {@code holderIdentity} (the owner; absent
 * when free), {@code leaseDurationSeconds} (the TTL <b>rounded up</b> to whole seconds, because the
 * field is an integer number of seconds), {@code leaseTransitions} (the token), {@code acquireTime}
 * and {@code renewTime} (wall-clock time, for people and tools; this class never reads them), the
 * annotation {@value #ATTEMPT_ANNOTATION} (a random mark of the call that last granted or released
 * it, see below) and the finalizer {@value #FINALIZER}.
 *
 * <p>The token counter lives in the Lease, so a deleted Lease would start again at token 1, and a
 * fence that remembers a higher token would refuse every new holder. Hence the finalizer, added by
 * every grant and renewal: a {@code kubectl delete} only marks the Lease for deletion until someone
 * also removes the finalizer; this class never removes it and never deletes a Lease. So deleting
 * the Lease's namespace also waits for that finalizer to be removed: delete first, then remove it
 * (a Lease being deleted is never renewed, so nothing puts it back), as the README's "Tearing down
 * a namespace or a Lease" shows.
 *
 * <h2>Algorithm</h2>
 *
 * Every write is an update (HTTP PUT) carrying the {@code resourceVersion} of the object just read,
 * so the API server refuses it with 409 Conflict if anyone wrote the Lease in between; a create
 * refused with 409 AlreadyExists means someone else created it first. Both are a lost race, a
 * return value.
 *
 * <ol>
 *   <li><b>Acquire</b> ({@link #tryAcquire}): read the Lease. Refuse (an {@link
 *       IllegalStateException}, logged at ERROR, that names the operator's remedy) if it is marked
 *       for deletion, or if its {@code leaseTransitions} is lower than the highest this instance
 *       had seen for the name before the read, or if it is absent although this instance had seen
 *       one with a positive token: it was deleted or re-created, and its next token would not be
 *       higher than an earlier grant's. Otherwise:
 *       <ul>
 *         <li>Absent: create it with {@code leaseTransitions = 1}.
 *         <li>Free (no or an empty {@code holderIdentity}): update it with {@code leaseTransitions
 *             + 1} (an absent or negative {@code leaseTransitions} counts as 0).
 *         <li>Held, but without a positive {@code leaseDurationSeconds} of at most {@link
 *             Deadline#MAX_LEASE_DURATION} (not written by this class, and no end this instance can
 *             watch out): refuse with an {@link IllegalStateException} that names the remedy, a
 *             Lease of the lock's own.
 *         <li>Held by anyone (the same owner included: the lock is not reentrant): this instance
 *             remembers "I saw {@code resourceVersion r}, with stored {@code leaseDurationSeconds
 *             D}, when my read <em>returned</em> at {@code t}" on its own monotonic {@link
 *             LeaseClock} (a {@link Deadline#forContender}, kept by {@link ObservedLeases}). A
 *             later {@code tryAcquire} that still reads {@code r} after {@code t + D} takes the
 *             Lease with an update on {@code r}, {@code leaseTransitions + 1}; any change of the
 *             object (a renewal, a new holder, a release, anyone's edit) gives a new {@code
 *             resourceVersion} and starts a new observation. Meanwhile {@code tryAcquire} returns
 *             empty: it is one non-blocking attempt, and the {@code FencedLock} facade repeats it
 *             with backoff.
 *       </ul>
 *       {@code leaseTransitions} is bumped on <em>every</em> acquisition, also when the same
 *       identity takes the Lease again (client-go bumps it only when the holder changes, which
 *       would hand the same token to two grants).
 *   <li><b>Renew</b> ({@link #renew}): only a grant this instance made and whose deadline (the
 *       stored duration counted from before its last successful write was sent) has not passed;
 *       otherwise false without a request. Read the Lease; if {@code holderIdentity} and {@code
 *       leaseTransitions} are still {@code (owner, token)}, update {@code renewTime} and {@code
 *       leaseDurationSeconds} on the read {@code resourceVersion}; a Lease marked for deletion is
 *       refused as in step 1.
 *   <li><b>Release</b> ({@link #release}): read; if still {@code (owner, token)}, remove {@code
 *       holderIdentity} with an update on the read {@code resourceVersion}. Any instance may
 *       release (owner and token name the grant). A second release, or a stale one after a
 *       takeover, finds someone else's (or no) holder and returns false without writing. A release
 *       of a grant this instance made whose deadline has passed returns false, as renew does (the
 *       lease expired, whether or not a contender has taken it yet), and still frees the Lease if
 *       it is this grant's, so that the next holder need not watch it. A Lease marked for deletion
 *       may still be released: giving a lock up is always safe.
 * </ol>
 *
 * A write whose answer was lost is resent by fabric8 (after an {@code IOException}, 429 or 5xx),
 * and the resend meets the first send's own write as a conflict. So every grant and release write
 * carries a fresh random mark in the annotation {@value #ATTEMPT_ANNOTATION}, and a grant refused
 * with 409 re-reads the Lease: if it shows this owner, the token and this call's mark, it is the
 * grant (no other write carries that mark; owner, token and times are not enough, since another
 * call of the same owner may take the Lease in between at the same wall-clock instant). A release
 * refused with 409 whose re-read shows the Lease free with the token and the mark of one of its
 * sends answers true; one that finds another grant throws {@link BackendUnavailableException} (it
 * may have landed, or the grant expired and was taken over first) and forgets the grant.
 *
 * <p>A renewal or release whose update conflicts re-reads and tries again while the Lease is still
 * {@code (owner, token)} (someone edited, say, a label), at most {@value #MAX_CONFLICTS} times;
 * then it throws {@link BackendUnavailableException}.
 *
 * <h2>Why this is safe without comparing clocks</h2>
 *
 * A holder counts its lease from before its request was sent, so its deadline ends no later than
 * {@code D} after its write. A contender counts {@code D} from when a read that already showed that
 * write returned, which is later. The only assumption is that the two monotonic clocks run at about
 * the same <em>rate</em> over one lease duration. A grant made by this instance counts as observed
 * from the moment its write was sent (its own holder deadline on the same clock), so another caller
 * of the same instance may take it over once that deadline has passed. A holder paused past its
 * deadline can still write late: that is what the fence at the resource is for.
 *
 * <p>State is per instance: observations of Leases held by others, the deadline of each grant made
 * here, and the highest token seen per lock name (with the Lease's uid). Use one instance per
 * process, shared by all threads. Memory: one small entry per lock name seen held and per grant
 * held; grants are forgotten on a release that writes or a renewal the Lease refuses; expired
 * grants are kept (so that their renew and release keep answering false) until there are more than
 * 10,000, when expired entries are pruned. The highest token (and the Lease's uid) is kept for the
 * {@link KubernetesLeaseLockConfig#rememberedNames} most recently used names (default 10,000; a
 * grant, renewal, read or {@link #inspect} uses a name), the least recently used forgotten first:
 * for a forgotten name this instance is like a freshly started process, which cannot tell a deleted
 * and re-created Lease from a new one and grants from its counter (the fence still refuses a token
 * lower than one it has seen). The uids of Leases being deleted that were reported at ERROR are
 * kept under the same bound.
 *
 * <p>Thread-safe. A failed API call other than 409 and 404 (unreachable server, timeout, 403
 * Forbidden, 5xx) is a {@link BackendUnavailableException}; nothing is known about whether it took
 * effect.
 */
public final class KubernetesLeaseLockBackend implements LockBackend {

  /** How often a renewal or release re-reads after a conflict while the Lease is still ours. */
  public static final int MAX_CONFLICTS = 5;

  /**
   * The finalizer every grant and renewal puts on its Lease, so that deleting the Lease (which
   * would restart the token counter at 1) needs a second, deliberate step: removing this finalizer.
   */
  public static final String FINALIZER = "nolock.dev/fencing-token";

  /**
   * The annotation each grant and release write carries: a random mark of that one call, by which a
   * call that meets a conflict recognises its own earlier send (resent by the HTTP client after its
   * answer was lost).
   */
  public static final String ATTEMPT_ANNOTATION = "nolock.dev/attempt";

  private static final Logger LOG = LoggerFactory.getLogger(KubernetesLeaseLockBackend.class);

  private static final int PRUNE_ABOVE = 10_000;

  /** The wait {@link #inspect} reports for a held Lease whose end nobody can tell. */
  private static final Duration NO_KNOWN_END = Duration.ofNanos(Long.MAX_VALUE);

  private record Grant(String name, long token) {}

  private record Holding(String owner, Deadline deadline) {}

  /** The highest {@code leaseTransitions} this instance has seen for a name, and on which Lease. */
  private record HighWater(long token, String uid) {}

  /** What a read showed; {@code holder} is empty when the Lease is free. */
  private record Stored(
      Lease lease,
      String holder,
      long transitions,
      Integer durationSeconds,
      String resourceVersion) {

    boolean isFree() {
      return holder.isEmpty();
    }

    boolean isHeldBy(String owner, FencingToken token) {
      return holder.equals(owner) && transitions == token.value();
    }
  }

  private final KubernetesClient client;
  private final KubernetesLeaseLockConfig config;
  private final LeaseClock clock;
  private final String namespace;
  private final ObservedLeases observations;
  private final ConcurrentMap<Grant, Holding> holdings = new ConcurrentHashMap<>();
  private final Map<String, HighWater> highWater;

  /** The uids of the Leases being deleted that were already reported at ERROR. */
  private final Set<String> reportedDeletions;

  private KubernetesLeaseLockBackend(KubernetesClient client, KubernetesLeaseLockConfig config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = config.clock();
    this.namespace = config.namespace();
    this.observations = new ObservedLeases(clock);
    this.highWater = leastRecentlyUsed(config.rememberedNames());
    this.reportedDeletions = Collections.newSetFromMap(leastRecentlyUsed(config.rememberedNames()));
  }

  /** A thread-safe map that forgets its least recently read or written key beyond {@code cap}. */
  private static <K, V> Map<K, V> leastRecentlyUsed(int cap) {
    return Collections.synchronizedMap(
        new LinkedHashMap<>(16, 0.75f, true) {
          @Override
          protected boolean removeEldestEntry(Map.Entry<K, V> eldest) {
            return size() > cap;
          }
        });
  }

  /** A backend on {@code client} with {@code config}; the caller keeps owning the client. */
  public static KubernetesLeaseLockBackend create(
      KubernetesClient client, KubernetesLeaseLockConfig config) {
    return new KubernetesLeaseLockBackend(client, config);
  }

  public KubernetesLeaseLockConfig config() {
    return config;
  }

  /** How many lock names this instance remembers the highest token of. */
  int rememberedNames() {
    return highWater.size();
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    String leaseName = leaseName(name);
    requireOwner(owner);
    int seconds = leaseSeconds(ttl);
    // Only what was recorded before the read was sent must show in it: another thread may record
    // a higher token while this read is on its way.
    HighWater before = highWater.get(name);
    Lease lease = read(name, leaseName);
    long returned = clock.nanoTime();
    requireContinuousCounter(name, leaseName, lease, before);
    if (lease == null) {
      return grant(name, leaseName, owner, seconds, null);
    }
    Stored stored = stored(name, lease);
    if (stored.isFree()) {
      return grant(name, leaseName, owner, seconds, stored);
    }
    if (!observe(name, stored, returned).hasExpired()) {
      return Option.none();
    }
    return grant(name, leaseName, owner, seconds, stored);
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    String leaseName = leaseName(name);
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    int seconds = leaseSeconds(ttl);
    Grant grant = new Grant(name, token.value());
    Holding held = holdings.get(grant);
    if (held == null || !held.owner().equals(owner)) {
      return false; // not a grant of this instance, or already released or lost
    }
    for (int attempt = 0; attempt < MAX_CONFLICTS; attempt++) {
      // The holding as it is now: a renewal of this grant confirmed meanwhile moved its deadline.
      Holding current = holdings.get(grant);
      if (current == null || current.deadline().hasExpired()) {
        // A contender may already be entitled to it. The holding stays, so that a later release
        // of this grant answers false too (see release).
        return false;
      }
      Lease lease = read(name, leaseName);
      if (lease == null || !stored(name, lease).isHeldBy(owner, token)) {
        holdings.remove(grant, held);
        return false; // released, or taken over
      }
      if (isBeingDeleted(lease)) {
        throw beingDeleted(name, leaseName, stored(name, lease));
      }
      Lease renewed =
          new LeaseBuilder(protect(lease))
              .editSpec()
              .withRenewTime(now())
              .withLeaseDurationSeconds(seconds)
              .endSpec()
              .build();
      long sent = clock.nanoTime();
      Lease written = updateOrNull(renewed, "renew lock \"" + name + "\"");
      if (written != null) {
        Deadline deadline = Deadline.forHolder(clock, sent, Duration.ofSeconds(seconds));
        holdings.replace(grant, held, new Holding(owner, deadline));
        observations.wrote(name, resourceVersion(name, written), deadline);
        record(name, written, token.value()); // a held name stays among the remembered ones
        return true;
      }
      // Conflict: someone wrote the Lease between our read and our update. Read again.
    }
    throw conflicted("renew", name);
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    String leaseName = leaseName(name);
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    Grant grant = new Grant(name, token.value());
    Holding held = holdings.get(grant);
    if (held != null && held.owner().equals(owner) && held.deadline().hasExpired()) {
      // Expired, as renew judges it, even if no contender has taken it yet: "true" would tell
      // the holder its lease lasted until now. The Lease is freed all the same (only if it is
      // still this grant's), so that the next holder need not watch it for a full duration.
      try {
        free(name, leaseName, owner, token, grant);
      } catch (BackendUnavailableException e) {
        // The answer is false whatever became of the write: the lease had expired.
        LOG.debug("Freeing the expired Lease of {} (token {}) failed", name, token.value(), e);
      }
      return false;
    }
    return free(name, leaseName, owner, token, grant);
  }

  /**
   * The release write and its resolution after a conflict or a lost answer ({@link #release}).
   *
   * @return true when this call freed the lease, false when it was not this grant's to free
   */
  private boolean free(
      String name, String leaseName, String owner, FencingToken token, Grant grant) {
    List<String> sent = new ArrayList<>();
    for (int attempt = 0; attempt < MAX_CONFLICTS; attempt++) {
      Lease lease = read(name, leaseName);
      if (lease == null || !stored(name, lease).isHeldBy(owner, token)) {
        forget(grant, owner);
        if (sent.isEmpty()) {
          return false; // already free, or someone else's: change nothing
        }
        if (isOwnRelease(name, lease, token, sent)) {
          observations.forget(name);
          return true; // our update landed; its answer was lost and the resend met it
        }
        throw lostRelease(name);
      }
      String mark = UUID.randomUUID().toString();
      Lease released =
          new LeaseBuilder(lease)
              .editMetadata()
              .addToAnnotations(ATTEMPT_ANNOTATION, mark)
              .endMetadata()
              .editSpec()
              .withHolderIdentity(null)
              .withRenewTime(now())
              .endSpec()
              .build();
      sent.add(mark);
      if (updateOrNull(released, "release lock \"" + name + "\"") != null) {
        forget(grant, owner);
        observations.forget(name);
        return true;
      }
    }
    throw conflicted("release", name);
  }

  /**
   * The holder as {@link #inspect} sees it ({@link ObservedLease#liveHolder}): the Lease counts as
   * held until this instance has seen it unchanged for its {@code leaseDurationSeconds}
   * (client-go's rule; {@code renewTime} is never compared with the local clock).
   *
   * @throws IllegalArgumentException as {@link #inspect}
   */
  @Override
  public Option<LeaseHolder> holder(String name) {
    return inspect(name).flatMap(ObservedLease::liveHolder);
  }

  /**
   * Reads the Lease of {@code name} and records the observation, exactly as {@link #tryAcquire}
   * does, without taking anything: what is stored, and how much longer this instance must see the
   * same {@code resourceVersion} before its {@code tryAcquire} may take the Lease over.
   *
   * <p>"Expired" is always the judgement of one observer on its own monotonic clock: it has seen
   * the same {@code resourceVersion} for at least the Lease's {@code leaseDurationSeconds} (or
   * wrote that version itself at least that long ago). The Lease's {@code renewTime} is never
   * compared with any clock.
   *
   * <p>The snapshot's holder is the stored {@code holderIdentity} with the stored {@code
   * leaseTransitions} as its token; a Lease without a holder (absent or empty {@code
   * holderIdentity}) is free, whatever its {@code leaseTransitions}. Its version is the {@code
   * resourceVersion}, its duration the stored {@code leaseDurationSeconds} (empty when absent).
   *
   * <p>A Lease this backend did not write (client-go's, or one made by hand) is reported as stored
   * too, never refused, since observers (a dashboard, an elector's {@code onNewLeader}) call this:
   *
   * <ul>
   *   <li>Held with {@code leaseTransitions} 0, absent or negative (client-go's first holder has
   *       0): {@link #tryAcquire} reads the counter as 0 and its takeover writes 1, so the holder
   *       is reported with token 1, the lowest token, never above a grant of this backend (it
   *       equals the first one; this holder has no fencing token of its own).
   *   <li>Held without a positive {@code leaseDurationSeconds} (nobody can tell when it ends), or
   *       with one longer than {@link Deadline#MAX_LEASE_DURATION} (longer than this backend can
   *       watch out): {@link #tryAcquire} refuses it with an {@link IllegalStateException}. It is
   *       reported held and never expired, with {@code waitLeft} {@code
   *       Duration.ofNanos(Long.MAX_VALUE)} (about 292 years, still convertible to nanoseconds),
   *       and no watch of it is recorded.
   * </ul>
   *
   * @return empty when no Lease exists for {@code name}
   * @throws IllegalArgumentException when the Lease is held by a {@code holderIdentity} that is not
   *     a lease owner name ({@link LeaseHolder}: blank, longer than {@value
   *     dev.nolock.patterns.Lease#MAX_OWNER_LENGTH} characters, or with a control character), which
   *     no grant of this backend writes
   */
  public Option<ObservedLease> inspect(String name) {
    String leaseName = leaseName(name);
    Lease lease = read(name, leaseName);
    long returned = clock.nanoTime();
    if (lease == null) {
      return Option.none();
    }
    Stored stored = stored(name, lease);
    record(name, lease, stored.transitions());
    Option<String> version = Option.some(stored.resourceVersion());
    Option<Duration> duration =
        Option.of(stored.durationSeconds())
            .map(seconds -> Duration.ofSeconds(Math.max(0, seconds)));
    if (stored.isFree()) {
      return Option.some(new ObservedLease(Option.none(), version, duration, Duration.ZERO));
    }
    // An observer reports what is stored and refuses nothing it can read; only tryAcquire refuses
    // a Lease whose end nobody can tell.
    Duration waitLeft =
        hasKnownEnd(stored) ? observe(name, stored, returned).remaining() : NO_KNOWN_END;
    // Counter 0 (client-go's first holder): below every grant of ours, but tokens start at 1.
    FencingToken token = FencingToken.of(Math.max(1, stored.transitions()));
    return Option.some(
        new ObservedLease(
            Option.some(new LeaseHolder(stored.holder(), token)), version, duration, waitLeft));
  }

  /**
   * Whether {@code stored}'s {@code leaseDurationSeconds} is a duration this instance can watch out
   * ({@link ObservedLeases} takes at most {@link Deadline#MAX_LEASE_DURATION}): positive and no
   * longer than that, as every grant of this backend writes.
   */
  private static boolean hasKnownEnd(Stored stored) {
    Integer seconds = stored.durationSeconds();
    return seconds != null && seconds > 0 && seconds <= Deadline.MAX_LEASE_DURATION.toSeconds();
  }

  /**
   * The takeover deadline of {@code stored}'s version ({@link ObservedLeases}): the earliest watch
   * of it this instance has, or a new one.
   */
  private Deadline observe(String name, Stored stored, long returnedAtNanos) {
    Integer seconds = stored.durationSeconds();
    if (!hasKnownEnd(stored)) {
      throw new IllegalStateException(
          "The Lease \""
              + config.leaseName(name)
              + "\" in namespace \""
              + namespace
              + "\" is held by \""
              + stored.holder()
              + "\" but has "
              + (seconds == null || seconds <= 0
                  ? "no positive leaseDurationSeconds: it was not written by"
                      + " KubernetesLeaseLockBackend, and nobody can tell when it ends"
                  : "leaseDurationSeconds "
                      + seconds
                      + ", more than the "
                      + Deadline.MAX_LEASE_DURATION.toSeconds()
                      + " that KubernetesLeaseLockBackend writes or can watch out: it was not"
                      + " written by it")
              + ". Use a Lease of the lock's own (another leaseNamePrefix).");
    }
    return observations.observe(
        name, stored.resourceVersion(), Duration.ofSeconds(seconds), returnedAtNanos);
  }

  /** Creates the Lease ({@code seen} null) or takes it over on {@code seen}'s resourceVersion. */
  private Option<FencingToken> grant(
      String name, String leaseName, String owner, int seconds, Stored seen) {
    long next = (seen == null ? 0 : seen.transitions()) + 1;
    if (next > Integer.MAX_VALUE) {
      throw new IllegalStateException(
          "The Lease \""
              + leaseName
              + "\" has leaseTransitions "
              + Integer.MAX_VALUE
              + ", the largest the field holds: no higher token can be issued under this name."
              + " Use a new lock name (and a new fence row for it).");
    }
    ZonedDateTime now = now();
    String mark = UUID.randomUUID().toString();
    Lease desired =
        (seen == null
                ? new LeaseBuilder()
                    .withNewMetadata()
                    .withName(leaseName)
                    .withNamespace(namespace)
                    .withFinalizers(FINALIZER)
                    .endMetadata()
                : new LeaseBuilder(protect(seen.lease())))
            .editMetadata()
            .addToAnnotations(ATTEMPT_ANNOTATION, mark)
            .endMetadata()
            .editOrNewSpec()
            .withHolderIdentity(owner)
            .withLeaseDurationSeconds(seconds)
            .withLeaseTransitions((int) next)
            .withAcquireTime(now)
            .withRenewTime(now)
            .endSpec()
            .build();
    String what = "acquire lock \"" + name + "\"";
    long sent = clock.nanoTime();
    Lease written = seen == null ? createOrNull(desired, what) : updateOrNull(desired, what);
    if (written == null) {
      // fabric8 resends a write whose answer was lost; the resend then meets our own write.
      written = ownGrant(name, leaseName, owner, next, mark);
    }
    if (written == null) {
      return Option.none(); // another contender was faster, or the holder renewed
    }
    Integer stored = written.getSpec() == null ? null : written.getSpec().getLeaseTransitions();
    if (stored == null || stored != next) {
      throw new IllegalStateException(
          "The API server accepted the grant of lock \""
              + name
              + "\" with leaseTransitions "
              + next
              + " but returned "
              + stored
              + ": something rewrites Leases (an admission webhook?). Keep it off Lease \""
              + leaseName
              + "\".");
    }
    Deadline deadline = Deadline.forHolder(clock, sent, Duration.ofSeconds(seconds));
    if (holdings.size() > PRUNE_ABOVE) {
      // Grants lost without a release (the holder never called it): their deadlines are past.
      holdings.values().removeIf(held -> held.deadline().hasExpired());
    }
    holdings.put(new Grant(name, next), new Holding(owner, deadline));
    observations.wrote(name, resourceVersion(name, written), deadline);
    record(name, written, next);
    return Option.some(FencingToken.of(next));
  }

  /**
   * Refuses to grant on a Lease whose counter could not continue above every token this instance
   * had seen for {@code name} before it read {@code lease} ({@code seen}), and records what {@code
   * lease} shows otherwise:
   *
   * <ol>
   *   <li>a Lease marked for deletion is refused (a grant would outlive it, and the next Lease
   *       would start again at token 1);
   *   <li>an absent Lease, after this instance has seen one with a positive token, was deleted: a
   *       new one would start at token 1, which a fence that saw the old tokens refuses;
   *   <li>a Lease whose {@code leaseTransitions} is below the highest this instance has seen was
   *       re-created (or its counter set back): its next grant's token would not be higher than an
   *       earlier grant's.
   * </ol>
   *
   * Each refusal is an {@link IllegalStateException}, logged at ERROR, naming the operator's
   * remedy.
   */
  private void requireContinuousCounter(
      String name, String leaseName, Lease lease, HighWater seen) {
    if (lease == null) {
      if (seen != null && seen.token() > 0) {
        throw loud(
            "The Lease \""
                + leaseName
                + "\" in namespace \""
                + namespace
                + "\" was deleted after this process saw leaseTransitions "
                + seen.token()
                + " on it (someone removed its finalizer "
                + FINALIZER
                + "). Re-creating it would restart the fencing tokens at 1, and a fence that has"
                + " seen a higher token refuses every holder until the tokens pass it: no grant"
                + " is made. Create the Lease again with spec.leaseTransitions at least the highest"
                + " token your fences have seen (at least "
                + seen.token()
                + "), held by its last holder with its leaseDurationSeconds, or free only once a"
                + " lease duration has passed since the deletion (its holder may believe it holds"
                + " it until then); see \"When the Lease is deleted\" in the README of"
                + " nolock-fenced-lock-kubernetes.");
      }
      return;
    }
    Stored stored = stored(name, lease);
    if (isBeingDeleted(lease)) {
      throw beingDeleted(name, leaseName, stored);
    }
    if (seen != null && stored.transitions() < seen.token()) {
      String uid = uid(lease);
      boolean recreated = seen.uid() != null && uid != null && !seen.uid().equals(uid);
      throw loud(
          "The Lease \""
              + leaseName
              + "\" in namespace \""
              + namespace
              + "\" "
              + (recreated
                  ? "was deleted and re-created (uid " + seen.uid() + ", now " + uid + ")"
                  : "was re-created or had its counter set back")
              + ": it shows leaseTransitions "
              + stored.transitions()
              + ", but this process saw "
              + seen.token()
              + " on it. A grant now would get a token no higher than an earlier grant's, which"
              + " a fence refuses: no grant is made. Set spec.leaseTransitions to at least the"
              + " highest token your fences have seen (at least "
              + seen.token()
              + "), e.g. kubectl patch lease "
              + leaseName
              + " --type=merge -p '{\"spec\":{\"leaseTransitions\":"
              + seen.token()
              + "}}'; see \"When the Lease is deleted\" in the README of"
              + " nolock-fenced-lock-kubernetes.");
    }
    record(name, lease, stored.transitions());
  }

  /** Remembers {@code token} as seen on {@code lease} if it is the highest yet for the name. */
  private void record(String name, Lease lease, long token) {
    highWater.merge(
        name,
        new HighWater(token, uid(lease)),
        (before, now) -> now.token() > before.token() ? now : before);
  }

  private static boolean isBeingDeleted(Lease lease) {
    return lease.getMetadata() != null && lease.getMetadata().getDeletionTimestamp() != null;
  }

  /**
   * The refusal of a Lease being deleted, logged at ERROR the first time this instance meets that
   * Lease (by uid) and at DEBUG after that: a holder's watchdog meets it on every renewal interval.
   */
  private IllegalStateException beingDeleted(String name, String leaseName, Stored stored) {
    String uid = uid(stored.lease());
    String message =
        "The Lease \""
            + leaseName
            + "\" of lock \""
            + name
            + "\" in namespace \""
            + namespace
            + "\" is being deleted (it has a deletionTimestamp; its finalizer "
            + FINALIZER
            + " keeps it), at leaseTransitions "
            + stored.transitions()
            + ": no grant or renewal is made on it, because its successor would start again at"
            + " token 1. A deletion cannot be undone: to keep the lock, save the Lease (kubectl get"
            + " lease "
            + leaseName
            + " -o json), remove the finalizer (kubectl patch lease "
            + leaseName
            + " --type=json -p '[{\"op\":\"remove\",\"path\":\"/metadata/finalizers\"}]'),"
            + " and create the saved copy again still held, with the same holderIdentity,"
            + " leaseDurationSeconds and leaseTransitions (a free one would let a contender in"
            + " while its holder may still believe it holds it); see \"When the Lease is"
            + " deleted\" in the README of nolock-fenced-lock-kubernetes.";
    if (reportedDeletions.add(uid == null ? namespace + "/" + leaseName : uid)) {
      LOG.error(message);
    } else {
      LOG.debug(message);
    }
    return new IllegalStateException(message);
  }

  private static IllegalStateException loud(String message) {
    LOG.error(message);
    return new IllegalStateException(message);
  }

  /** {@code lease} with {@link #FINALIZER} among its finalizers. */
  private static Lease protect(Lease lease) {
    List<String> finalizers = lease.getMetadata().getFinalizers();
    return finalizers != null && finalizers.contains(FINALIZER)
        ? lease
        : new LeaseBuilder(lease).editMetadata().addToFinalizers(FINALIZER).endMetadata().build();
  }

  private static String uid(Lease lease) {
    return lease.getMetadata() == null ? null : lease.getMetadata().getUid();
  }

  /**
   * The Lease, if it shows the grant whose create or update was refused as a conflict: the same
   * owner and token, and this call's {@code mark} (which no other write carries), so that the
   * conflict was this call's own earlier send, whose answer was lost. Owner, token and times are
   * not enough: another call of the same owner can take the Lease between this call's read and
   * write, at the same wall-clock instant (a coarse or stopped clock), and its grant's deadline
   * counts from its own send, not this one's.
   */
  private Lease ownGrant(String name, String leaseName, String owner, long token, String mark) {
    Lease lease = read(name, leaseName);
    if (lease == null || !stored(name, lease).isHeldBy(owner, FencingToken.of(token))) {
      return null;
    }
    return mark.equals(mark(lease)) ? lease : null;
  }

  /** Whether {@code lease} is free with the token and the mark of one of our sends. */
  private boolean isOwnRelease(String name, Lease lease, FencingToken token, List<String> sent) {
    if (lease == null) {
      return false;
    }
    Stored stored = stored(name, lease);
    return stored.isFree() && stored.transitions() == token.value() && sent.contains(mark(lease));
  }

  private static String mark(Lease lease) {
    Map<String, String> annotations =
        lease.getMetadata() == null ? null : lease.getMetadata().getAnnotations();
    return annotations == null ? null : annotations.get(ATTEMPT_ANNOTATION);
  }

  private static BackendUnavailableException lostRelease(String name) {
    return new BackendUnavailableException(
        "The release of lock \""
            + name
            + "\" met a conflict, and its Lease now belongs to another"
            + " grant: the release may have landed with its answer lost (the HTTP client resent"
            + " it), or the grant had expired and been taken over first. Whether it took effect"
            + " is unknown; the grant is over either way, do not retry it.",
        null);
  }

  private Lease read(String name, String leaseName) {
    return call(
        "read lock \"" + name + "\"",
        () -> client.leases().inNamespace(namespace).withName(leaseName).get());
  }

  /** Creates {@code lease}; null when it already exists (409 AlreadyExists). */
  private Lease createOrNull(Lease lease, String what) {
    try {
      return client.leases().inNamespace(namespace).resource(lease).create();
    } catch (KubernetesClientException e) {
      if (e.getCode() == 409) {
        return null;
      }
      throw translate(e, what);
    }
  }

  /**
   * Replaces {@code lease} on its {@code resourceVersion}; null when the server refused it because
   * the object changed (409 Conflict) or is gone (404).
   */
  private Lease updateOrNull(Lease lease, String what) {
    if (lease.getMetadata().getResourceVersion() == null) {
      // Without a resourceVersion the update would be unconditional: never send one.
      throw new IllegalStateException("No resourceVersion to " + what + " on");
    }
    try {
      return client.leases().inNamespace(namespace).resource(lease).update();
    } catch (KubernetesClientException e) {
      if (e.getCode() == 409 || e.getCode() == 404) {
        return null;
      }
      throw translate(e, what);
    }
  }

  private Stored stored(String name, Lease lease) {
    LeaseSpec spec = lease.getSpec();
    String holder =
        spec == null || spec.getHolderIdentity() == null ? "" : spec.getHolderIdentity();
    long transitions =
        spec == null || spec.getLeaseTransitions() == null
            ? 0
            : Math.max(0, spec.getLeaseTransitions());
    Integer seconds = spec == null ? null : spec.getLeaseDurationSeconds();
    return new Stored(lease, holder, transitions, seconds, resourceVersion(name, lease));
  }

  private String resourceVersion(String name, Lease lease) {
    String version = lease.getMetadata() == null ? null : lease.getMetadata().getResourceVersion();
    if (version == null || version.isEmpty()) {
      throw new IllegalStateException(
          "The API server returned the Lease of lock \""
              + name
              + "\" without a resourceVersion: it"
              + " cannot be updated conditionally, so this backend cannot use it.");
    }
    return version;
  }

  private void forget(Grant grant, String owner) {
    holdings.computeIfPresent(grant, (g, held) -> held.owner().equals(owner) ? null : held);
  }

  private ZonedDateTime now() {
    // MicroTime fields hold microseconds, shown in UTC (as client-go writes them): send what will
    // be stored, whatever zone the configured clock is in.
    return ZonedDateTime.now(config.wallClock())
        .withZoneSameInstant(ZoneOffset.UTC)
        .truncatedTo(ChronoUnit.MICROS);
  }

  private <R> R call(String what, Supplier<R> request) {
    try {
      return request.get();
    } catch (KubernetesClientException e) {
      throw translate(e, what);
    }
  }

  private BackendUnavailableException translate(KubernetesClientException e, String what) {
    int code = e.getCode();
    String hint =
        code == 401 || code == 403
            ? " The client's identity needs get and update on this lock's Lease (an RBAC rule"
                + " with resourceNames), and create on leases unless the Lease is created"
                + " beforehand, in group coordination.k8s.io, namespace \""
                + namespace
                + "\": see rbac.yaml in nolock-fenced-lock-kubernetes."
            : " Retry later.";
    return new BackendUnavailableException(
        "Kubernetes API call to "
            + what
            + " (Lease in namespace \""
            + namespace
            + "\") failed"
            + (code > 0 ? " with HTTP " + code : "")
            + ": "
            + detail(e)
            + "."
            + hint,
        e);
  }

  private static String detail(KubernetesClientException e) {
    String message = String.valueOf(e.getMessage()).strip();
    while (message.endsWith(".")) {
      message = message.substring(0, message.length() - 1);
    }
    Throwable cause = e.getCause();
    return cause == null ? message : message + ", caused by " + cause;
  }

  private BackendUnavailableException conflicted(String verb, String name) {
    return new BackendUnavailableException(
        "Could not "
            + verb
            + " lock \""
            + name
            + "\": its Lease was still this holder's but changed"
            + " between each read and update, "
            + MAX_CONFLICTS
            + " times in a row (does something else keep"
            + " writing it?). Retry later.",
        null);
  }

  private String leaseName(String name) {
    Names.requireName("lock name", name, dev.nolock.patterns.Lease.MAX_NAME_LENGTH);
    return config.leaseName(name);
  }

  private static void requireOwner(String owner) {
    Names.requireName("lease owner", owner, dev.nolock.patterns.Lease.MAX_OWNER_LENGTH);
  }

  /** The TTL in whole seconds, rounded up: {@code leaseDurationSeconds} is an integer. */
  static int leaseSeconds(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.isNegative() || ttl.isZero() || ttl.compareTo(Deadline.MAX_LEASE_DURATION) > 0) {
      throw new IllegalArgumentException(
          "A Kubernetes lease duration must be positive and at most "
              + Deadline.MAX_LEASE_DURATION
              + ", got "
              + ttl
              + ": pass a TTL a few times longer than the critical section (it is"
              + " stored rounded up to whole seconds).");
    }
    long seconds = ttl.toSeconds() + (ttl.toNanosPart() > 0 ? 1 : 0);
    return Math.toIntExact(seconds);
  }

  @Override
  public String toString() {
    return "KubernetesLeaseLockBackend[" + config + "]";
  }
}
