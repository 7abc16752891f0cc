package dev.nolock.lock.dynamodb;

import dev.nolock.dynamodb.ConditionalWrites;
import dev.nolock.dynamodb.ConditionalWrites.Applied;
import dev.nolock.dynamodb.ConditionalWrites.Outcome;
import dev.nolock.dynamodb.ConditionalWrites.Refused;
import dev.nolock.dynamodb.DynamoDbFailures;
import dev.nolock.dynamodb.OneKeyTables;
import dev.nolock.lock.ObservedLeases;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ReturnValue;
import software.amazon.awssdk.services.dynamodb.model.UpdateItemResponse;

/**
 * A {@link LockBackend} on one DynamoDB table that <b>never compares clocks between machines</b>:
 * the record version number (rvn) lease of the AWS DynamoDB Lock Client, plus a fencing token.
 *
 * <h2>The lease item</h2>
 *
 * One item per lock name: {@value #OWNER} (the holder: one grant's identity), {@value #RVN} (a
 * random UUID, new with every grant, heartbeat and release), {@value #LEASE_DURATION} (the holder's
 * lease duration in whole milliseconds, rounded up, stored with each rvn), {@value #TOKEN} (a
 * counter bumped in the same conditional write as every grant) and {@value #RELEASED}. No timestamp
 * is stored: DynamoDB does not decide expiry, and nobody reads another machine's clock.
 *
 * <h2>Algorithm</h2>
 *
 * <ol>
 *   <li><b>Acquire</b> ({@link #tryAcquire}): a consistent {@code GetItem}.
 *       <ul>
 *         <li>No item, or a released one: one conditional {@code UpdateItem} takes it, on {@code
 *             attribute_not_exists(#pk)} or {@code #rvn = :seen}, writing owner, a new rvn, the
 *             lease duration, {@code released = false} and {@code ADD #token :one} together; the
 *             new token comes back with {@code ReturnValues=UPDATED_NEW}.
 *         <li>Held by someone: the caller cannot tell from the item whether the holder is alive,
 *             and must not compare timestamps. This instance remembers "I saw rvn {@code r}, with
 *             stored duration {@code D}, when my read <em>returned</em> at {@code t}" (a {@link
 *             Deadline#forContender}, kept by {@link ObservedLeases}). A later {@code tryAcquire}
 *             that still reads rvn {@code r} after {@code t + D} takes the lease with the same
 *             conditional write, on {@code #rvn = :r}; a different rvn (the holder heartbeated)
 *             starts a new observation. Meanwhile {@code tryAcquire} returns empty: it is one
 *             non-blocking attempt, and the {@code FencedLock} facade's {@code acquire} repeats it
 *             with backoff.
 *         <li>Held by this very owner (the same grant asking again, e.g. a caller's retry after an
 *             "unknown"): the grant's own token, after a refresh that writes a new rvn and duration
 *             on {@code #owner = :o AND #token = :t AND #rvn = :seen AND #released = false}, so
 *             that the caller's deadline (counted from before this call) never outlasts a
 *             contender's watch. Nothing new is granted.
 *       </ul>
 *       So <b>a contender takes a lease over only after it has watched the item for a full stored
 *       lease duration, on its own monotonic clock, with no heartbeat</b>. Its first call never
 *       takes a held lease, even one that died long ago: someone must watch it die.
 *   <li><b>Heartbeat</b> ({@link #renew}): a new rvn and lease duration, on {@code #owner = :o AND
 *       #token = :t AND #rvn = :myLastRvn AND #released = false}. This instance keeps each grant's
 *       last rvn and its holder deadline ({@link Deadline#forHolder}, counted from before the
 *       request was sent); a renewal after that deadline, or of a grant this instance did not make,
 *       returns false without a request.
 *   <li><b>Release</b> ({@link #release}): {@code released = true} and a new rvn, on {@code #owner
 *       = :o AND #token = :t AND #released = false}. Not on the rvn: owner and token already name
 *       the grant, and a release must also work after a heartbeat whose response was lost, or from
 *       another instance of the same owner. The item is not deleted, because the token counter
 *       lives in it; tokens keep rising across releases. A second release, or a stale one after a
 *       takeover, matches nothing and returns false. A release of a grant this instance made whose
 *       holder deadline has passed returns false, as renew does (the lease expired, whether or not
 *       a contender has taken it yet), and still frees the item if it is this grant's, so that the
 *       next holder need not watch it.
 * </ol>
 *
 * <h2>Lost answers</h2>
 *
 * Every conditional write is sent with the AWS SDK's retries off for that request and retried by
 * this class (up to three attempts, {@code ConditionalWrites}), because a resend of a write that
 * landed fails its own condition, and the SDK would report that refusal as the answer. Each attempt
 * writes a fresh rvn, so after an ambiguous attempt (no answer, or a server error) a refusal is
 * resolved by reading the item:
 *
 * <ul>
 *   <li>acquire: the item holds this owner's unreleased lease with an rvn this call wrote: that
 *       grant is returned (its deadline counted from before the call's first write); otherwise the
 *       decision starts again from the item as it is now, at most three times;
 *   <li>renew: the item holds this grant with an rvn this call wrote: renewed; with an rvn another
 *       renewal of this grant wrote from this instance: tried again on that rvn; otherwise the
 *       lease is no longer this grant's (false);
 *   <li>release: the item is this grant's, released with an rvn this call wrote: true; released
 *       with another rvn: an earlier release call freed it (false); anything else (the next holder
 *       took the freed lease at once): unknown.
 * </ul>
 *
 * When the attempts run out, or the item cannot tell, the call throws {@link
 * BackendUnavailableException}: the outcome is unknown. A lease granted by an attempt whose answer
 * never came back blocks others for one observation at most, and its own grant gets it back by
 * asking again.
 *
 * <p>An rvn is random, so it cannot fence anything downstream; the {@link FencingToken} is the
 * {@value #TOKEN} counter, which only ever grows while the item exists.
 *
 * <h2>Why this is safe without comparing clocks</h2>
 *
 * A holder counts its lease from before its request was sent, so its own deadline ends no later
 * than {@code D} after the write of its rvn. A contender counts {@code D} from when a read that
 * already showed that rvn returned, which is later than that write. The only assumption is that the
 * two monotonic clocks run at about the same <em>rate</em> over one lease duration; their values
 * are never compared. Within one backend instance, a lease it granted itself is measured from its
 * own write (the holder's deadline, on the same clock), so that instance can take it over as soon
 * as the holder's own deadline has passed. A holder paused past its deadline can still write late:
 * that is what the fence is for ({@code dev.nolock.patterns.sql.Fence} for SQL, {@code
 * dev.nolock.dynamodb.DynamoDbFence} for one DynamoDB item).
 *
 * <p>State is per instance: observations of held leases and the rvn of each grant made here. Use
 * one instance per process, shared by all threads; a second instance in the same process only waits
 * longer before a takeover. Memory: one small entry per lock name seen held and per grant held;
 * grants are forgotten on a release that writes or a renewal the store refused; expired grants are
 * kept (so that their renew and release keep answering false) until there are more than 10,000,
 * when expired observations and grants are pruned.
 *
 * <p>Thread-safe. Failures of DynamoDB or the network, and outcomes left unknown by a lost answer,
 * are {@link BackendUnavailableException}s; a missing table an {@link IllegalStateException} saying
 * how to create it.
 */
public final class DynamoDbLockBackend implements LockBackend {

  private static final Logger LOG = LoggerFactory.getLogger(DynamoDbLockBackend.class);

  /** The holder's owner identity (string). */
  public static final String OWNER = "owner";

  /** The record version number (string, a UUID). */
  public static final String RVN = "rvn";

  /** The lease duration in milliseconds that the holder stored with the rvn (number). */
  public static final String LEASE_DURATION = "lease_duration_ms";

  /** The fencing token counter (number); never reset while the item exists. */
  public static final String TOKEN = "token";

  /** Whether the lease was released (boolean). */
  public static final String RELEASED = "released";

  static final Set<String> ITEM_ATTRIBUTES = Set.of(OWNER, RVN, LEASE_DURATION, TOKEN, RELEASED);

  private static final int PRUNE_ABOVE = 10_000;
  private static final int MAX_PASSES = 3;
  private static final String GRANT_UPDATE =
      "SET #owner = :owner, #rvn = :rvn, #duration = :duration, #released = :false"
          + " ADD #token :one";

  private record Grant(String name, long token) {}

  /**
   * A grant this instance holds: its owner, its last confirmed rvn and holder deadline, and the
   * rvns its renewals wrote lately ({@code written}, shared by every holding of the grant), which
   * tell another renewal of this same grant (the watchdog's beside an extension, or one whose
   * outcome was unknown) from anyone else's write.
   */
  private record Holding(String owner, String rvn, Deadline deadline, RecentRvns written) {}

  /**
   * The last {@value #CAPACITY} rvns the renewals of one grant wrote. Renewals of one grant out at
   * once, or left unknown, are a handful; older rvns can no longer be the stored one that a renewal
   * meets.
   */
  private static final class RecentRvns {
    private static final int CAPACITY = 16;
    private final ArrayDeque<String> rvns = new ArrayDeque<>();

    synchronized void add(String rvn) {
      rvns.addLast(rvn);
      if (rvns.size() > CAPACITY) {
        rvns.removeFirst();
      }
    }

    synchronized boolean contains(String rvn) {
      return rvns.contains(rvn);
    }
  }

  private record Stored(
      String owner, String rvn, long token, Duration leaseDuration, boolean released) {}

  /**
   * The writes of one call: the rvns its attempts wrote, when its first write was sent, and whether
   * an attempt was ambiguous (its answer lost, so it may have landed). Confined to the calling
   * thread.
   */
  private static final class Writes {
    private final List<String> rvns = new ArrayList<>();
    private final RecentRvns alsoTo;
    private long firstSentNanos;
    private boolean started;
    private boolean ambiguous;

    void sending(long nowNanos) {
      if (!started) {
        started = true;
        firstSentNanos = nowNanos;
      }
    }

    Writes() {
      this(null);
    }

    /** The writes of a renewal of a grant, each rvn also recorded in its {@code written}. */
    Writes(RecentRvns alsoTo) {
      this.alsoTo = alsoTo;
    }

    String newRvn() {
      String rvn = UUID.randomUUID().toString();
      rvns.add(rvn);
      if (alsoTo != null) {
        alsoTo.add(rvn); // before the write is sent: a renewal beside it may meet it stored
      }
      return rvn;
    }

    /** The rvn of the latest attempt: the applied one, right after an {@link Applied}. */
    String lastRvn() {
      return rvns.get(rvns.size() - 1);
    }

    void markAmbiguous() {
      ambiguous = true;
    }

    boolean wrote(String rvn) {
      return rvns.contains(rvn);
    }

    boolean ambiguous() {
      return ambiguous;
    }

    long firstSentNanos() {
      return firstSentNanos;
    }
  }

  private final DynamoDbClient client;
  private final DynamoDbLockBackendConfig config;
  private final LeaseClock clock;
  private final String table;
  private final ObservedLeases observations;
  private final ConcurrentMap<Grant, Holding> holdings = new ConcurrentHashMap<>();

  private DynamoDbLockBackend(DynamoDbClient client, DynamoDbLockBackendConfig config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = config.clock();
    this.table = config.tableName();
    this.observations = new ObservedLeases(clock);
  }

  /** A backend on {@code client} with the default table; the caller keeps owning the client. */
  public static DynamoDbLockBackend create(DynamoDbClient client) {
    return create(client, DynamoDbLockBackendConfig.ofDefaults());
  }

  /** A backend on {@code client} with {@code config}; the caller keeps owning the client. */
  public static DynamoDbLockBackend create(
      DynamoDbClient client, DynamoDbLockBackendConfig config) {
    return new DynamoDbLockBackend(client, config);
  }

  public DynamoDbLockBackendConfig config() {
    return config;
  }

  /**
   * Creates the lease table (string partition key {@link DynamoDbLockBackendConfig#keyAttribute()},
   * on-demand billing) unless it exists, and waits until it is active.
   *
   * @return true when this call created it
   */
  public boolean createTableIfMissing() {
    return OneKeyTables.createIfMissing(client, table, config.keyAttribute());
  }

  /**
   * {@inheritDoc}
   *
   * <p>Reads the item, then takes it (no item, released, or watched unchanged for its stored
   * duration), refreshes it (this grant's own lease: same token, new rvn), or returns empty. A
   * write refused after an attempt whose answer was lost reads the item again: if it holds an rvn
   * this call wrote, the grant is this call's.
   */
  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    requireName(name);
    requireOwner(owner);
    long ttlMillis = requireTtl(ttl);
    Writes mine = new Writes();
    for (int pass = 1; ; pass++) {
      Option<Stored> item = read(name);
      long returned = clock.nanoTime();
      if (item.isDefined() && isOwnUnreleased(item.get(), owner, mine)) {
        // An earlier attempt of this call took (or refreshed) the lease; its answer was lost.
        return Option.some(hold(name, owner, ttl, item.get().token(), item.get().rvn(), mine));
      }
      Option<FencingToken> result;
      if (item.isEmpty()) {
        result = grant(name, owner, ttl, ttlMillis, null, mine);
      } else if (item.get().released()) {
        result = grant(name, owner, ttl, ttlMillis, item.get().rvn(), mine);
      } else if (!observe(name, item.get(), returned).hasExpired()) {
        if (!item.get().owner().equals(owner)) {
          return refusedBy(name, item.get(), ttl, mine);
        }
        // The grant that holds the lease asks again (a caller's retry after "unknown"): the
        // same token, with a new rvn so that a contender's watch starts again.
        result = refresh(name, owner, ttl, ttlMillis, item.get(), mine);
      } else {
        result = grant(name, owner, ttl, ttlMillis, item.get().rvn(), mine);
      }
      if (result.isDefined()) {
        return result;
      }
      if (!mine.ambiguous()) {
        return Option.none(); // another contender was faster, or the holder heartbeated
      }
      if (pass >= MAX_PASSES) {
        throw unknown("acquire lock \"" + name + "\"", "the lease item changed under every try");
      }
    }
  }

  /**
   * {@inheritDoc}
   *
   * <p>A new rvn and duration on {@code #owner = :o AND #token = :t AND #rvn = :myLastRvn AND
   * #released = false}. A refusal reads the item: an rvn this call wrote means an attempt whose
   * answer was lost landed (renewed); owner and token still this grant's, unreleased, with an rvn
   * another renewal of this grant wrote here means that renewal changed it first (the watchdog's
   * beside an extension, or an earlier call whose outcome was unknown), so the write is tried again
   * on the stored rvn, at most three times and only while the holder's deadline has not passed;
   * anything else (released, taken over, an rvn anyone else wrote) means the lease is no longer
   * this grant's (false).
   */
  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    requireName(name);
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    long ttlMillis = requireTtl(ttl);
    Grant grant = new Grant(name, token.value());
    Holding held = holdings.get(grant);
    if (held == null || !held.owner().equals(owner)) {
      return false; // not a grant of this instance, or already released or lost
    }
    if (held.deadline().hasExpired()) {
      // A contender may already be entitled to it. The holding stays, so that a later release
      // of this grant answers false too (see release).
      return false;
    }
    Writes mine = new Writes(held.written());
    String what = "renew lock \"" + name + "\"";
    String expected = held.rvn();
    String renewed = null;
    for (int pass = 1; renewed == null; pass++) {
      Outcome<?> outcome = rewriteRvn(what, name, owner, token.value(), expected, ttlMillis, mine);
      if (outcome instanceof Applied<?>) {
        renewed = mine.lastRvn();
        continue;
      }
      // Refused: the item says why. A stored rvn of this call is a landed attempt; one another
      // renewal of this grant wrote means it changed the rvn first (try again on it); anything
      // else (released, taken over, or an rvn written by anyone else) means the lease is lost.
      Option<Stored> now = read(name);
      if (now.isEmpty()
          || !isGrant(now.get(), owner, token)
          || now.get().released()
          || !held.written().contains(now.get().rvn())) {
        holdings.remove(grant, held);
        return false;
      }
      if (mine.wrote(now.get().rvn())) {
        renewed = now.get().rvn();
        continue;
      }
      Holding current = holdings.get(grant);
      if (current == null || current.deadline().hasExpired()) {
        return false; // released here meanwhile, or expired: a contender may be entitled to it
      }
      if (pass >= MAX_PASSES) {
        throw unknown(what, "other renewals of this grant changed its rvn under every try");
      }
      expected = now.get().rvn();
    }
    Deadline deadline = Deadline.forHolder(clock, mine.firstSentNanos(), ttl);
    // The stored lease is now this call's, if its write replaced the rvn the holding names (the
    // one this call started from, or one a renewal beside it confirmed meanwhile); a holding that
    // names a later rvn belongs to a renewal that landed after this one and stays.
    String replaced = expected;
    String stored = renewed;
    holdings.computeIfPresent(
        grant,
        (g, h) ->
            h == held || h.rvn().equals(replaced)
                ? new Holding(owner, stored, deadline, h.written())
                : h);
    observations.wrote(name, renewed, deadline);
    return true;
  }

  /**
   * {@inheritDoc}
   *
   * <p>{@code released = true} and a new rvn, on {@code #owner = :o AND #token = :t AND #released =
   * false}. A refusal after an attempt whose answer was lost reads the item: released with an rvn
   * this call wrote is this call's release (true); released with another rvn, an earlier call's
   * (false); anything else (the next holder took the freed lease at once, or the item is gone)
   * leaves the outcome unknown.
   */
  @Override
  public boolean release(String name, String owner, FencingToken token) {
    requireName(name);
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    Grant grant = new Grant(name, token.value());
    Holding held = holdings.get(grant);
    if (held != null && held.owner().equals(owner) && held.deadline().hasExpired()) {
      // Expired, as renew judges it, even if no contender has taken it yet: "true" would tell
      // the holder its lease lasted until now. The item is freed all the same (the write is on
      // owner and token, so it can free no one else's lease), so that the next holder need not
      // watch it for a full duration. The holding stays, so that asking again answers the same.
      try {
        free(name, owner, token);
      } catch (BackendUnavailableException e) {
        // The answer is false whatever became of the write: the lease had expired.
        LOG.debug("Freeing the expired lease of {} (token {}) failed", name, token.value(), e);
      }
      return false;
    }
    try {
      return free(name, owner, token);
    } finally {
      // Released, no longer this owner's grant, or unknown: this grant is not renewed any more.
      holdings.computeIfPresent(grant, (g, h) -> h.owner().equals(owner) ? null : h);
    }
  }

  /**
   * The release write and its resolution after a lost answer ({@link #release}).
   *
   * @return true when this call freed the lease, false when it was not this grant's to free
   */
  private boolean free(String name, String owner, FencingToken token) {
    String what = "release lock \"" + name + "\"";
    Writes mine = new Writes();
    Outcome<?> outcome =
        conditionally(
            what,
            mine,
            rvn ->
                client.updateItem(
                    update ->
                        update
                            .tableName(table)
                            .key(key(name))
                            .updateExpression("SET #released = :true, #rvn = :rvn")
                            .conditionExpression(
                                "#owner = :owner AND #token = :token AND #released = :false")
                            .expressionAttributeNames(
                                Map.of(
                                    "#released", RELEASED,
                                    "#rvn", RVN,
                                    "#owner", OWNER,
                                    "#token", TOKEN))
                            .expressionAttributeValues(
                                Map.of(
                                    ":true", AttributeValue.fromBool(true),
                                    ":false", AttributeValue.fromBool(false),
                                    ":rvn", AttributeValue.fromS(rvn),
                                    ":owner", AttributeValue.fromS(owner),
                                    ":token", number(token.value())))
                            .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT)));
    boolean released = outcome instanceof Applied<?>;
    if (!released && mine.ambiguous()) {
      Option<Stored> now = read(name);
      if (now.isEmpty() || !isGrant(now.get(), owner, token) || !now.get().released()) {
        throw unknown(
            what,
            "the resend was refused and the lease is now "
                + now.map(n -> n.owner() + "'s (token " + n.token() + ")").getOrElse("gone")
                + ": the first attempt may have freed it before that");
      }
      released = mine.wrote(now.get().rvn());
    }
    if (released) {
      observations.forget(name);
    }
    return released;
  }

  /**
   * The holder as {@link #inspect} sees it ({@link ObservedLease#liveHolder}): a lease counts as
   * held until this instance has seen its rvn unchanged for the stored lease duration (DynamoDB has
   * no server-side expiry to ask).
   */
  @Override
  public Option<LeaseHolder> holder(String name) {
    return inspect(name).flatMap(ObservedLease::liveHolder);
  }

  /**
   * Reads the lease item of {@code name} (consistently) and records the observation, exactly as
   * {@link #tryAcquire} does, without taking anything: what is stored, and how much longer this
   * instance must see the same rvn before its {@code tryAcquire} may take the lease over.
   *
   * <p>DynamoDB stores no time for the lease, so "expired" is this instance's judgement on its own
   * monotonic clock: it has seen the same rvn for at least the stored lease duration (or wrote that
   * rvn itself at least that long ago).
   *
   * @return empty when no lease item exists for {@code name}; a released item is a free lease (no
   *     holder), with the rvn and the duration it stores
   */
  public Option<ObservedLease> inspect(String name) {
    requireName(name);
    Option<Stored> item = read(name);
    long returned = clock.nanoTime();
    return item.map(
        stored ->
            stored.released()
                ? new ObservedLease(
                    Option.none(),
                    Option.some(stored.rvn()),
                    Option.some(stored.leaseDuration()),
                    Duration.ZERO)
                : new ObservedLease(
                    Option.some(new LeaseHolder(stored.owner(), FencingToken.of(stored.token()))),
                    Option.some(stored.rvn()),
                    Option.some(stored.leaseDuration()),
                    observe(name, stored, returned).remaining()));
  }

  /**
   * The takeover deadline of {@code stored}'s rvn ({@link ObservedLeases}): the earliest watch of
   * it this instance has, or a new one.
   */
  private Deadline observe(String name, Stored stored, long returnedAtNanos) {
    return observations.observe(name, stored.rvn(), stored.leaseDuration(), returnedAtNanos);
  }

  /**
   * The conditional write that takes the lease with a new token: on {@code attribute_not_exists}
   * when {@code seenRvn} is null, else on {@code #rvn = :seen}.
   *
   * @return the new token; empty when refused
   */
  private Option<FencingToken> grant(
      String name, String owner, Duration ttl, long ttlMillis, String seenRvn, Writes mine) {
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#rvn", RVN);
    names.put("#duration", LEASE_DURATION);
    names.put("#released", RELEASED);
    names.put("#token", TOKEN);
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", AttributeValue.fromS(owner));
    values.put(":duration", number(ttlMillis));
    values.put(":false", AttributeValue.fromBool(false));
    values.put(":one", number(1));
    String condition;
    if (seenRvn == null) {
      names.put("#pk", config.keyAttribute());
      condition = "attribute_not_exists(#pk)";
    } else {
      values.put(":seen", AttributeValue.fromS(seenRvn));
      condition = "#rvn = :seen";
    }
    Outcome<UpdateItemResponse> outcome =
        conditionally(
            "acquire lock \"" + name + "\"",
            mine,
            rvn -> {
              Map<String, AttributeValue> attempt = new HashMap<>(values);
              attempt.put(":rvn", AttributeValue.fromS(rvn));
              return client.updateItem(
                  update ->
                      update
                          .tableName(table)
                          .key(key(name))
                          .updateExpression(GRANT_UPDATE)
                          .conditionExpression(condition)
                          .expressionAttributeNames(names)
                          .expressionAttributeValues(attempt)
                          .returnValues(ReturnValue.UPDATED_NEW)
                          .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT));
            });
    if (!(outcome instanceof Applied<UpdateItemResponse> applied)) {
      return Option.none();
    }
    AttributeValue token = applied.response().attributes().get(TOKEN);
    if (token == null || token.n() == null) {
      throw new IllegalStateException(
          "DynamoDB granted lock \""
              + name
              + "\" but returned no \""
              + TOKEN
              + "\" attribute"
              + " (ReturnValues=UPDATED_NEW): the server does not support it.");
    }
    return Option.some(hold(name, owner, ttl, Long.parseLong(token.n()), mine.lastRvn(), mine));
  }

  /**
   * The conditional write by which the grant that holds the lease takes it again: a new rvn and
   * duration, the same token, on {@code #owner = :o AND #token = :t AND #rvn = :seen AND #released
   * = false}.
   *
   * @return the stored token; empty when refused
   */
  private Option<FencingToken> refresh(
      String name, String owner, Duration ttl, long ttlMillis, Stored stored, Writes mine) {
    Outcome<?> outcome =
        rewriteRvn(
            "acquire lock \"" + name + "\" again",
            name,
            owner,
            stored.token(),
            stored.rvn(),
            ttlMillis,
            mine);
    if (!(outcome instanceof Applied<?>)) {
      return Option.none();
    }
    return Option.some(hold(name, owner, ttl, stored.token(), mine.lastRvn(), mine));
  }

  /**
   * The conditional write of a grant that holds the lease and keeps it (a heartbeat, or the same
   * grant asking again): a new rvn and duration, the same token, on {@code #owner = :owner AND
   * #token = :token AND #rvn = :seen AND #released = false}, where {@code :seen} is {@code
   * expectedRvn}.
   */
  private Outcome<UpdateItemResponse> rewriteRvn(
      String what,
      String name,
      String owner,
      long token,
      String expectedRvn,
      long ttlMillis,
      Writes mine) {
    return conditionally(
        what,
        mine,
        rvn ->
            client.updateItem(
                update ->
                    update
                        .tableName(table)
                        .key(key(name))
                        .updateExpression("SET #rvn = :rvn, #duration = :duration")
                        .conditionExpression(
                            "#owner = :owner AND #token = :token AND #rvn = :seen"
                                + " AND #released = :false")
                        .expressionAttributeNames(
                            Map.of(
                                "#rvn", RVN,
                                "#duration", LEASE_DURATION,
                                "#owner", OWNER,
                                "#token", TOKEN,
                                "#released", RELEASED))
                        .expressionAttributeValues(
                            Map.of(
                                ":rvn", AttributeValue.fromS(rvn),
                                ":duration", number(ttlMillis),
                                ":owner", AttributeValue.fromS(owner),
                                ":token", number(token),
                                ":seen", AttributeValue.fromS(expectedRvn),
                                ":false", AttributeValue.fromBool(false)))
                        .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT)));
  }

  /**
   * Records a grant this call holds, its deadline counted from before this call's first write, and
   * returns its token.
   */
  private FencingToken hold(
      String name, String owner, Duration ttl, long token, String rvn, Writes mine) {
    Deadline deadline = Deadline.forHolder(clock, mine.firstSentNanos(), ttl);
    if (holdings.size() > PRUNE_ABOVE) {
      // Grants lost without a release (the holder never called it): their deadlines are past.
      holdings.values().removeIf(held -> held.deadline().hasExpired());
    }
    holdings.put(new Grant(name, token), new Holding(owner, rvn, deadline, new RecentRvns()));
    observations.wrote(name, rvn, deadline);
    return FencingToken.of(token);
  }

  /**
   * Empty, for a lease another owner holds: unless an earlier attempt of this call may have taken
   * it and that grant may since have been taken over, which needs a full stored duration ({@code
   * ttl}) of watching it.
   */
  private Option<FencingToken> refusedBy(String name, Stored stored, Duration ttl, Writes mine) {
    if (mine.ambiguous()
        && Duration.ofNanos(clock.nanoTime() - mine.firstSentNanos()).compareTo(ttl) >= 0) {
      throw unknown(
          "acquire lock \"" + name + "\"",
          "an attempt whose answer was lost may have taken the lease before "
              + stored.owner()
              + " took it over");
    }
    return Option.none();
  }

  private Option<Stored> read(String name) {
    GetItemResponse response =
        call(
            "read lock \"" + name + "\"",
            () -> client.getItem(get -> get.tableName(table).key(key(name)).consistentRead(true)));
    if (!response.hasItem() || response.item().isEmpty()) {
      return Option.none();
    }
    Map<String, AttributeValue> item = response.item();
    AttributeValue owner = item.get(OWNER);
    AttributeValue rvn = item.get(RVN);
    AttributeValue duration = item.get(LEASE_DURATION);
    AttributeValue token = item.get(TOKEN);
    AttributeValue released = item.get(RELEASED);
    if (owner == null
        || owner.s() == null
        || rvn == null
        || rvn.s() == null
        || duration == null
        || duration.n() == null
        || token == null
        || token.n() == null
        || released == null
        || released.bool() == null) {
      throw new IllegalStateException(
          "The item of lock \""
              + name
              + "\" in table \""
              + table
              + "\" lacks one of "
              + ITEM_ATTRIBUTES
              + " or has another type: it was not written by"
              + " DynamoDbLockBackend. Use a table of the lock's own.");
    }
    return Option.some(
        new Stored(
            owner.s(),
            rvn.s(),
            Long.parseLong(token.n()),
            Duration.ofMillis(Long.parseLong(duration.n())),
            released.bool()));
  }

  /**
   * Sends one conditional write with the SDK's retries off and the library's own on ({@link
   * ConditionalWrites}); each attempt writes a fresh rvn, recorded in {@code mine}.
   */
  private <R> Outcome<R> conditionally(String what, Writes mine, Function<String, R> attempt) {
    mine.sending(clock.nanoTime());
    Outcome<R> outcome =
        ConditionalWrites.send(clock, n -> attempt.apply(mine.newRvn()), e -> translate(e, what));
    if (outcome instanceof Refused<R> refused && refused.afterAmbiguousAttempt()) {
      mine.markAmbiguous();
    }
    return outcome;
  }

  /** The outcome of {@code what} is unknown, for the reason {@code why}. */
  private BackendUnavailableException unknown(String what, String why) {
    return new BackendUnavailableException(
        "DynamoDB did not answer an attempt to "
            + what
            + " on table \""
            + table
            + "\", and "
            + why
            + ". Whether it took effect is unknown; retry later.",
        null);
  }

  private static boolean isGrant(Stored stored, String owner, FencingToken token) {
    return stored.owner().equals(owner) && stored.token() == token.value();
  }

  private static boolean isOwnUnreleased(Stored stored, String owner, Writes mine) {
    return !stored.released() && stored.owner().equals(owner) && mine.wrote(stored.rvn());
  }

  private <R> R call(String what, Supplier<R> request) {
    try {
      return request.get();
    } catch (SdkException e) {
      throw translate(e, what);
    }
  }

  private RuntimeException translate(SdkException e, String what) {
    return DynamoDbFailures.translate(e, what, table, config.keyAttribute());
  }

  private Map<String, AttributeValue> key(String name) {
    return Map.of(config.keyAttribute(), AttributeValue.fromS(name));
  }

  private static AttributeValue number(long value) {
    return AttributeValue.fromN(Long.toString(value));
  }

  private static void requireName(String name) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
  }

  private static void requireOwner(String owner) {
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
  }

  /**
   * The lease duration to store, in whole milliseconds rounded up: the holder counts the whole
   * {@code ttl}, so a contender must wait at least as long.
   */
  private static long requireTtl(Duration ttl) {
    Objects.requireNonNull(ttl, "ttl");
    if (ttl.toMillis() < 1 || ttl.compareTo(Deadline.MAX_LEASE_DURATION) > 0) {
      throw new IllegalArgumentException(
          "A DynamoDB lease duration must be between 1 ms and "
              + Deadline.MAX_LEASE_DURATION
              + " (it is stored in milliseconds), got "
              + ttl
              + ": pass a TTL a few times longer"
              + " than the critical section.");
    }
    long millis = ttl.toMillis();
    return ttl.equals(Duration.ofMillis(millis)) ? millis : millis + 1;
  }

  @Override
  public String toString() {
    return "DynamoDbLockBackend[" + table + "]";
  }
}
