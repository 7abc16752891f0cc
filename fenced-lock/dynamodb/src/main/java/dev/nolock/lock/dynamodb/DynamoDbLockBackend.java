package dev.nolock.lock.dynamodb;

import dev.nolock.dynamodb.internal.DynamoDbFailures;
import dev.nolock.dynamodb.internal.Tables;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.function.Supplier;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ReturnValue;

/**
 * A {@link LockBackend} on one DynamoDB table that <b>never compares clocks between machines</b>:
 * the record version number (rvn) lease of the AWS DynamoDB Lock Client, plus a fencing token.
 *
 * <h2>The lease item</h2>
 *
 * One item per lock name: {@value #OWNER} (the holder), {@value #RVN} (a random UUID, new with
 * every grant, heartbeat and release), {@value #LEASE_DURATION} (the holder's lease duration,
 * stored with each rvn), {@value #TOKEN} (a counter bumped in the same conditional write as every
 * grant) and {@value #RELEASED}. No timestamp is stored: DynamoDB does not decide expiry, and
 * nobody reads another machine's clock.
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
 *             Deadline#forContender}). A later {@code tryAcquire} that still reads rvn {@code r}
 *             after {@code t + D} takes the lease with the same conditional write, on {@code #rvn =
 *             :r}; a different rvn (the holder heartbeated) starts a new observation. Meanwhile
 *             {@code tryAcquire} returns empty: it is one non-blocking attempt, and the {@code
 *             FencedLock} facade's {@code acquire} repeats it with backoff.
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
 *       takeover, matches nothing and returns false.
 * </ol>
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
 * that is what the fence is for ({@link dev.nolock.patterns.Fence} for SQL, {@code
 * dev.nolock.dynamodb.DynamoDbFence} for one DynamoDB item).
 *
 * <p>State is per instance: observations of held leases and the rvn of each grant made here. Use
 * one instance per process, shared by all threads; a second instance in the same process only waits
 * longer before a takeover. Memory: one small entry per lock name seen held and per grant held;
 * grants are forgotten on release or a refused renewal, and expired observations and grants are
 * pruned once there are more than 10,000.
 *
 * <p>Thread-safe. Failures of DynamoDB or the network are {@link
 * dev.nolock.patterns.BackendUnavailableException}s; a missing table an {@link
 * IllegalStateException} saying how to create it.
 */
public final class DynamoDbLockBackend implements LockBackend {

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
  private static final String GRANT_UPDATE =
      "SET #owner = :owner, #rvn = :rvn, #duration = :duration, #released = :false"
          + " ADD #token :one";

  private record Observation(String rvn, Deadline takeoverAt) {}

  private record Grant(String name, long token) {}

  private record Holding(String owner, String rvn, Deadline deadline) {}

  private record Stored(
      String owner, String rvn, long token, Duration leaseDuration, boolean released) {}

  private final DynamoDbClient client;
  private final DynamoDbLockBackendConfig config;
  private final LeaseClock clock;
  private final String table;
  private final ConcurrentMap<String, Observation> observations = new ConcurrentHashMap<>();
  private final ConcurrentMap<Grant, Holding> holdings = new ConcurrentHashMap<>();

  private DynamoDbLockBackend(DynamoDbClient client, DynamoDbLockBackendConfig config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
    this.clock = config.clock();
    this.table = config.tableName();
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
    return Tables.createIfMissing(client, table, config.keyAttribute());
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    requireName(name);
    requireOwner(owner);
    long ttlMillis = requireTtl(ttl);
    Option<Stored> item = read(name);
    long returned = clock.nanoTime();
    if (item.isEmpty()) {
      return grant(name, owner, ttl, ttlMillis, null);
    }
    Stored stored = item.get();
    if (stored.released()) {
      return grant(name, owner, ttl, ttlMillis, stored.rvn());
    }
    if (!observe(name, stored, returned).takeoverAt().hasExpired()) {
      return Option.none();
    }
    return grant(name, owner, ttl, ttlMillis, stored.rvn());
  }

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
      holdings.remove(grant, held);
      return false; // a contender may already be entitled to it
    }
    String rvn = newRvn();
    long sent = clock.nanoTime();
    boolean renewed =
        conditionally(
            "renew lock \"" + name + "\"",
            () ->
                client.updateItem(
                    update ->
                        update
                            .tableName(table)
                            .key(key(name))
                            .updateExpression("SET #rvn = :rvn, #duration = :duration")
                            .conditionExpression(
                                "#owner = :owner AND #token = :token AND #rvn = :last"
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
                                    ":token", number(token.value()),
                                    ":last", AttributeValue.fromS(held.rvn()),
                                    ":false", AttributeValue.fromBool(false)))));
    if (!renewed) {
      holdings.remove(grant, held);
      return false;
    }
    Deadline deadline = Deadline.forHolder(clock, sent, ttl);
    holdings.replace(grant, held, new Holding(owner, rvn, deadline));
    observations.put(name, new Observation(rvn, deadline));
    return true;
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    requireName(name);
    requireOwner(owner);
    Objects.requireNonNull(token, "token");
    Grant grant = new Grant(name, token.value());
    boolean released =
        conditionally(
            "release lock \"" + name + "\"",
            () ->
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
                                    ":rvn", AttributeValue.fromS(newRvn()),
                                    ":owner", AttributeValue.fromS(owner),
                                    ":token", number(token.value())))));
    // Released, or no longer this owner's grant (taken over, or released before): forget it.
    holdings.computeIfPresent(grant, (g, held) -> held.owner().equals(owner) ? null : held);
    if (released) {
      observations.remove(name);
    }
    return released;
  }

  /**
   * The holder as {@link #inspect} sees it: a lease counts as held until this instance has seen its
   * rvn unchanged for the stored lease duration (DynamoDB has no server-side expiry to ask).
   */
  @Override
  public Option<LeaseHolder> holder(String name) {
    return inspect(name)
        .filter(seen -> !seen.isExpired())
        .map(seen -> new LeaseHolder(seen.owner(), seen.token()));
  }

  /**
   * Reads the lease item of {@code name} (consistently) and records the observation, exactly as
   * {@link #tryAcquire} does, without taking anything: what is stored, and how much longer this
   * instance must see the same rvn before its {@code tryAcquire} may take the lease over.
   *
   * @return empty when no lease item exists for {@code name}
   */
  public Option<ObservedLease> inspect(String name) {
    requireName(name);
    Option<Stored> item = read(name);
    long returned = clock.nanoTime();
    return item.map(
        stored -> {
          Duration waitLeft =
              stored.released()
                  ? Duration.ZERO
                  : observe(name, stored, returned).takeoverAt().remaining();
          return new ObservedLease(
              stored.owner(),
              FencingToken.of(stored.token()),
              stored.rvn(),
              stored.leaseDuration(),
              stored.released(),
              waitLeft);
        });
  }

  /** The observation of {@code stored}'s rvn: the earliest one this instance has, or a new one. */
  private Observation observe(String name, Stored stored, long returnedAtNanos) {
    if (observations.size() > PRUNE_ABOVE) {
      observations.values().removeIf(o -> o.takeoverAt().hasExpired());
    }
    return observations.compute(
        name,
        (n, before) ->
            before != null && before.rvn().equals(stored.rvn())
                ? before
                : new Observation(
                    stored.rvn(),
                    Deadline.forContender(clock, returnedAtNanos, stored.leaseDuration())));
  }

  /**
   * The conditional write that takes the lease: on {@code attribute_not_exists} when {@code
   * seenRvn} is null, else on {@code #rvn = :seen}.
   */
  private Option<FencingToken> grant(
      String name, String owner, Duration ttl, long ttlMillis, String seenRvn) {
    String rvn = newRvn();
    Map<String, String> names = new HashMap<>();
    names.put("#owner", OWNER);
    names.put("#rvn", RVN);
    names.put("#duration", LEASE_DURATION);
    names.put("#released", RELEASED);
    names.put("#token", TOKEN);
    Map<String, AttributeValue> values = new HashMap<>();
    values.put(":owner", AttributeValue.fromS(owner));
    values.put(":rvn", AttributeValue.fromS(rvn));
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
    long sent = clock.nanoTime();
    Map<String, AttributeValue> updated;
    try {
      updated =
          client
              .updateItem(
                  update ->
                      update
                          .tableName(table)
                          .key(key(name))
                          .updateExpression(GRANT_UPDATE)
                          .conditionExpression(condition)
                          .expressionAttributeNames(names)
                          .expressionAttributeValues(values)
                          .returnValues(ReturnValue.UPDATED_NEW))
              .attributes();
    } catch (ConditionalCheckFailedException e) {
      return Option.none(); // another contender was faster, or the holder heartbeated
    } catch (SdkException e) {
      throw translate(e, "acquire lock \"" + name + "\"");
    }
    AttributeValue token = updated.get(TOKEN);
    if (token == null || token.n() == null) {
      throw new IllegalStateException(
          "DynamoDB granted lock \""
              + name
              + "\" but returned no \""
              + TOKEN
              + "\" attribute"
              + " (ReturnValues=UPDATED_NEW): the server does not support it.");
    }
    long value = Long.parseLong(token.n());
    Deadline deadline = Deadline.forHolder(clock, sent, ttl);
    if (holdings.size() > PRUNE_ABOVE) {
      // Grants lost without a release (the holder never called it): their deadlines are past.
      holdings.values().removeIf(held -> held.deadline().hasExpired());
    }
    holdings.put(new Grant(name, value), new Holding(owner, rvn, deadline));
    observations.put(name, new Observation(rvn, deadline));
    return Option.some(FencingToken.of(value));
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

  /** Sends one conditional write; false when its condition failed. */
  private boolean conditionally(String what, Runnable write) {
    try {
      write.run();
      return true;
    } catch (ConditionalCheckFailedException e) {
      return false;
    } catch (SdkException e) {
      throw translate(e, what);
    }
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

  private static String newRvn() {
    return UUID.randomUUID().toString();
  }

  private static void requireName(String name) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
  }

  private static void requireOwner(String owner) {
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
  }

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
    return ttl.toMillis();
  }

  @Override
  public String toString() {
    return "DynamoDbLockBackend[" + table + "]";
  }
}
