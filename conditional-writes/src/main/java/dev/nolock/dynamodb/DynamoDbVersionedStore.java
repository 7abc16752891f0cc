package dev.nolock.dynamodb;

import dev.nolock.dynamodb.ConditionalWrites.Applied;
import dev.nolock.dynamodb.ConditionalWrites.Outcome;
import dev.nolock.dynamodb.ConditionalWrites.Refused;
import dev.nolock.dynamodb.ConditionalWrites.Resend;
import dev.nolock.dynamodb.ConditionalWrites.Unanswered;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.IntFunction;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;

/**
 * A {@link VersionedStore} on a DynamoDB table: compare-and-swap on a <b>record version number</b>
 * (rvn), a fresh random UUID written with every change, so that no clock and no counter is compared
 * between machines.
 *
 * <p>Guarantee: a write that names rvn {@code v} is applied only if the item's rvn is still {@code
 * v} (DynamoDB evaluates the condition and applies the write atomically, per item), and every
 * applied write stores a new rvn; of two writers that read the same rvn exactly one succeeds, and
 * no update is lost. Losing is a {@link Conflict} value carrying the rvn the item has now. Reads
 * are strongly consistent.
 *
 * <p>Algorithm (attribute names always go through expression attribute names, {@code #pk}, {@code
 * #v}, {@code #rvn}, so reserved words such as {@code value} or {@code name} work):
 *
 * <ol>
 *   <li>{@code read}: {@code GetItem} with {@code ConsistentRead}.
 *   <li>{@code insert}: {@code PutItem} of key, value and a new rvn, conditioned on {@code
 *       attribute_not_exists(#pk)}.
 *   <li>{@code compareAndSet}: {@code UpdateItem SET #v = :value, #rvn = :new} conditioned on
 *       {@code #rvn = :expected}; other attributes of the item are left alone. On a missing item
 *       the condition fails too, so a compare-and-set never creates an item.
 *   <li>{@code delete}: {@code DeleteItem} conditioned on {@code #rvn = :expected}.
 *   <li>When a condition fails, a consistent {@code GetItem} reads the rvn the item has now for the
 *       {@link Conflict}. (DynamoDB's {@code ReturnValuesOnConditionCheckFailure} would return it
 *       with the failure, but the local test server ignores it; one code path, the tested one, is
 *       used everywhere.) The report is what the item held a moment after the refusal: another
 *       writer may have changed it in between.
 *   <li>{@code update}: read, apply the function, compare-and-set; on a conflict back off under the
 *       configured {@link dev.nolock.patterns.RetryPolicy} and try again with the item the conflict
 *       read returned (one read per attempt). A missing item is a conflict that is not retried.
 * </ol>
 *
 * <p>Lost answers. A write whose connection dropped may have been applied; resent, it fails its own
 * condition against what the first send wrote. So every conditional write is sent with the AWS
 * SDK's retries off for that request (the client stays the caller's), and retried here, up to three
 * attempts, each with a new rvn:
 *
 * <ol>
 *   <li>An attempt that gets no answer (or a server error) is ambiguous; one that is throttled is
 *       not. The next attempt follows a short backoff. An {@code insert} is not sent again after an
 *       ambiguous attempt: its condition, {@code attribute_not_exists}, holds again once another
 *       writer deleted the item it inserted, so a resend could insert a second time and undo that
 *       delete; a consistent read decides instead, as in the next step.
 *   <li>A refusal that follows an ambiguous attempt (for {@code insert}: the ambiguous attempt
 *       itself) is this call's success if a consistent read finds one of this call's rvns in the
 *       item ({@code insert}, {@code compareAndSet}, each attempt of {@code update}); otherwise the
 *       outcome is unknown. For {@code delete} it is always unknown: a deleted item keeps nothing
 *       that says who deleted it.
 *   <li>Unknown is a {@link BackendUnavailableException}, never a {@link Conflict}; {@code update}
 *       then stops, so its function is never applied twice to this call's own write.
 * </ol>
 *
 * <p>Errors: bad input is an {@link IllegalArgumentException}; a missing table, or a table whose
 * key schema does not match the configuration, an {@link IllegalStateException} saying how to fix
 * it; any other failure of DynamoDB or the network, and an outcome a lost answer left unknown, a
 * {@link BackendUnavailableException} (whether a write took effect is then unknown: re-read before
 * retrying).
 *
 * <p>Metrics ({@code component=store}, {@code name=}the configured instance): {@value #ATTEMPTS}
 * (conditional writes sent, each attempt), {@code nolock.conflicts} (refusals returned as a {@link
 * Conflict}), {@value #RETRIES} (attempts of {@code update} after its first) and {@value #GIVE_UPS}
 * ({@code update}s that returned a conflict because the retry policy gave up).
 *
 * <p>Immutable and thread-safe; the {@link DynamoDbClient} is the caller's and stays open.
 *
 * @param <T> the value type
 */
public final class DynamoDbVersionedStore<T> implements VersionedStore<String, T> {

  /**
   * Conditional writes sent. The three counters have the names of the PostgreSQL store's ({@code
   * nolock-cas-versioning}), so one dashboard covers both; the {@code name} tag tells the stores
   * apart.
   */
  public static final String ATTEMPTS = "nolock.cas.attempts";

  /** {@code update} attempts after the first, each one after a lost race. */
  public static final String RETRIES = "nolock.cas.retries";

  /** {@code update} calls that returned a conflict because the retry policy gave up. */
  public static final String GIVE_UPS = "nolock.cas.give_ups";

  private static final String PK = "#pk";
  private static final String V = "#v";
  private static final String RVN = "#rvn";

  private final DynamoDbClient client;
  private final DynamoDbVersionedStoreConfig<T> config;
  private final AttributeCodec<T> codec;
  private final String table;
  private final CoordinationMetrics metrics;
  private final Counter attempts;
  private final Counter retries;
  private final Counter giveUps;

  private DynamoDbVersionedStore(DynamoDbClient client, DynamoDbVersionedStoreConfig<T> config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
    this.codec = config.codec();
    this.table = config.tableName();
    // Without metrics(..), a registry that keeps nothing (no children).
    MeterRegistry registry = config.registry().getOrElse(CompositeMeterRegistry::new);
    this.metrics = CoordinationMetrics.of(registry, "store", config.instanceName());
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            "store",
            CoordinationMetrics.NAME_TAG,
            config.instanceName());
    this.attempts = counter(registry, ATTEMPTS, "Conditional writes sent", tags);
    this.retries = counter(registry, RETRIES, "update attempts after the first", tags);
    this.giveUps = counter(registry, GIVE_UPS, "updates whose retry policy gave up", tags);
  }

  /** A store on {@code client} with {@code config}; the caller keeps owning the client. */
  public static <T> DynamoDbVersionedStore<T> create(
      DynamoDbClient client, DynamoDbVersionedStoreConfig<T> config) {
    return new DynamoDbVersionedStore<>(client, config);
  }

  public DynamoDbVersionedStoreConfig<T> config() {
    return config;
  }

  /**
   * Creates the table (string partition key {@link DynamoDbVersionedStoreConfig#keyAttribute()},
   * on-demand billing) unless it exists, and waits until it is active. For tests and first runs;
   * production tables usually come from infrastructure code.
   *
   * @return true when this call created it
   */
  public boolean createTableIfMissing() {
    return OneKeyTables.createIfMissing(client, table, config.keyAttribute());
  }

  @Override
  public Option<Versioned<T>> read(String id) {
    requireId(id);
    return readItem(id);
  }

  /**
   * {@inheritDoc}
   *
   * <p>An attempt that gets no answer is not sent again (only a throttled one is): a consistent
   * read then finds this call's rvn in the item (inserted), or the outcome is unknown, a {@link
   * BackendUnavailableException}, also when the request never reached DynamoDB. A resend could not
   * tell an item that was never inserted from one this call inserted and another writer deleted
   * since, and would bring the deleted item back.
   */
  @Override
  public Either<Conflict, Versioned<T>> insert(String id, T value) {
    requireId(id);
    AttributeValue encoded = encode(value);
    String what = "insert item \"" + id + "\"";
    List<Version> sent = new ArrayList<>();
    Outcome<?> outcome =
        conditionally(
            what,
            Resend.ONLY_WHEN_NOT_APPLIED,
            attempt -> {
              Version version = newVersion();
              sent.add(version);
              return client.putItem(
                  put ->
                      put.tableName(table)
                          .item(
                              Map.of(
                                  config.keyAttribute(), AttributeValue.fromS(id),
                                  config.valueAttribute(), encoded,
                                  config.versionAttribute(), AttributeValue.fromS(version.value())))
                          .conditionExpression("attribute_not_exists(" + PK + ")")
                          .expressionAttributeNames(Map.of(PK, config.keyAttribute()))
                          .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT));
            });
    if (outcome instanceof Applied<?> applied) {
      return Either.right(new Versioned<>(value, sent.get(applied.attempt() - 1)));
    }
    if (outcome instanceof Unanswered<?>) {
      return Either.right(
          new Versioned<>(
              value,
              ownVersionOrUnknown(
                  id,
                  what,
                  sent,
                  "an insert is not sent again (had it landed and the item been deleted since, a"
                      + " resend would insert it a second time)")));
    }
    return Either.left(conflict(id, readItem(id)));
  }

  @Override
  public Either<Conflict, Versioned<T>> compareAndSet(String id, Version expected, T newValue) {
    requireId(id);
    requireVersion(expected);
    AttributeValue encoded = encode(newValue);
    return swap(id, expected, newValue, encoded)
        .mapLeft(current -> new Conflict(id, current.map(Versioned::version)));
  }

  /**
   * {@inheritDoc}
   *
   * <p>After an attempt whose answer was lost, a resend that is refused cannot tell whether the
   * first attempt deleted the item (the item is gone, or was inserted again, with nothing left that
   * names this call): the outcome is then unknown, a {@link BackendUnavailableException}, never a
   * conflict.
   */
  @Override
  public Either<Conflict, Version> delete(String id, Version expected) {
    requireId(id);
    requireVersion(expected);
    String what = "delete item \"" + id + "\"";
    Outcome<?> outcome =
        conditionally(
            what,
            Resend.ALWAYS,
            attempt ->
                client.deleteItem(
                    delete ->
                        delete
                            .tableName(table)
                            .key(key(id))
                            .conditionExpression(RVN + " = :expected")
                            .expressionAttributeNames(Map.of(RVN, config.versionAttribute()))
                            .expressionAttributeValues(
                                Map.of(":expected", AttributeValue.fromS(expected.value())))
                            .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT)));
    if (outcome instanceof Applied<?>) {
      return Either.right(expected);
    }
    if (((Refused<?>) outcome).afterAmbiguousAttempt()) {
      throw unknown(
          what,
          "a resend was refused, and a deleted item keeps no trace of who deleted it: re-read"
              + " the item; if it is gone, it was deleted (by this call or another)");
    }
    return Either.left(conflict(id, readItem(id)));
  }

  /**
   * {@inheritDoc}
   *
   * <p>Each attempt after a conflict reuses the item that the conflict's read returned, so an
   * attempt costs one {@code GetItem} and one {@code UpdateItem}. {@code change} may run several
   * times, once per item version read, and must not return null. When the write of one attempt lost
   * its answer and its fate cannot be read from the item, {@code update} throws {@link
   * BackendUnavailableException} instead of running {@code change} again.
   */
  @Override
  public Either<Conflict, Versioned<T>> update(String id, UnaryOperator<T> change) {
    requireId(id);
    Objects.requireNonNull(change, "change");
    AtomicReference<Option<Versioned<T>>> seen = new AtomicReference<>();
    AtomicInteger attempt = new AtomicInteger();
    // Right(Left(conflict)) ends the loop without a retry: the item is missing.
    Either<Conflict, Either<Conflict, Versioned<T>>> result =
        config
            .retryPolicy()
            .run(
                config.clock(),
                () -> {
                  if (attempt.incrementAndGet() > 1) {
                    retries.increment();
                  }
                  Option<Versioned<T>> current = seen.get() != null ? seen.get() : readItem(id);
                  if (current.isEmpty()) {
                    return Either.right(Either.left(new Conflict(id, Option.none())));
                  }
                  T next = change.apply(current.get().value());
                  if (next == null) {
                    throw new IllegalArgumentException(
                        "The change function returned null for item \""
                            + id
                            + "\": return the"
                            + " new value; to remove the item use delete(id, version).");
                  }
                  Either<Option<Versioned<T>>, Versioned<T>> swapped =
                      swap(id, current.get().version(), next, encode(next));
                  if (swapped.isRight()) {
                    return Either.right(Either.right(swapped.get()));
                  }
                  Option<Versioned<T>> now = swapped.getLeft();
                  seen.set(now);
                  Conflict conflict = new Conflict(id, now.map(Versioned::version));
                  return now.isEmpty()
                      ? Either.right(Either.left(conflict))
                      : Either.left(conflict);
                });
    if (result.isLeft()) {
      giveUps.increment();
      return Either.left(result.getLeft());
    }
    return result.get();
  }

  /**
   * The conditional update; on a refusal, the item as it is now (read consistently). A refusal that
   * follows an attempt whose answer was lost is this call's success if the item holds the version
   * one of its attempts wrote, and unknown otherwise.
   */
  private Either<Option<Versioned<T>>, Versioned<T>> swap(
      String id, Version expected, T value, AttributeValue encoded) {
    String what = "compare-and-set item \"" + id + "\"";
    List<Version> sent = new ArrayList<>();
    Outcome<?> outcome =
        conditionally(
            what,
            Resend.ALWAYS,
            attempt -> {
              Version version = newVersion();
              sent.add(version);
              return client.updateItem(
                  update ->
                      update
                          .tableName(table)
                          .key(key(id))
                          .updateExpression("SET " + V + " = :value, " + RVN + " = :new")
                          .conditionExpression(RVN + " = :expected")
                          .expressionAttributeNames(
                              Map.of(V, config.valueAttribute(), RVN, config.versionAttribute()))
                          .expressionAttributeValues(
                              Map.of(
                                  ":value", encoded,
                                  ":new", AttributeValue.fromS(version.value()),
                                  ":expected", AttributeValue.fromS(expected.value())))
                          .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT));
            });
    if (outcome instanceof Applied<?> applied) {
      return Either.right(new Versioned<>(value, sent.get(applied.attempt() - 1)));
    }
    if (((Refused<?>) outcome).afterAmbiguousAttempt()) {
      return Either.right(
          new Versioned<>(value, ownVersionOrUnknown(id, what, sent, "a resend was refused")));
    }
    metrics.conflict();
    return Either.left(readItem(id));
  }

  /**
   * Sends one conditional write, each attempt counted, with the SDK's retries off and the library's
   * own on ({@link ConditionalWrites}).
   */
  private Outcome<?> conditionally(String what, Resend resend, IntFunction<?> attempt) {
    return ConditionalWrites.send(
        config.clock(),
        n -> {
          attempts.increment();
          return attempt.apply(n);
        },
        e -> DynamoDbFailures.translate(e, what, table, config.keyAttribute()),
        resend);
  }

  /**
   * After an attempt whose answer was lost and no later attempt that was applied: the version one
   * of this call's attempts wrote, if the item holds it now; otherwise the outcome is unknown.
   *
   * @param why why the item has to decide, for the message
   */
  private Version ownVersionOrUnknown(String id, String what, List<Version> sent, String why) {
    Option<Version> now = readItem(id).map(Versioned::version);
    if (now.isDefined() && sent.contains(now.get())) {
      return now.get();
    }
    throw unknown(
        what,
        why
            + ", and the item now holds "
            + (now.isDefined() ? "version " + now.get().value() : "nothing")
            + ", not one this call wrote: an attempt may have landed and been overwritten or"
            + " deleted since, or none landed. Re-read the item");
  }

  private Conflict conflict(String id, Option<Versioned<T>> now) {
    metrics.conflict();
    return new Conflict(id, now.map(Versioned::version));
  }

  private BackendUnavailableException unknown(String what, String why) {
    return new BackendUnavailableException(
        "DynamoDB did not answer an attempt to "
            + what
            + " on table \""
            + table
            + "\"; "
            + why
            + ". Whether this call took effect is unknown.",
        null);
  }

  private Option<Versioned<T>> readItem(String id) {
    GetItemResponse response =
        call(
            "read item \"" + id + "\"",
            () ->
                client.getItem(
                    get ->
                        get.tableName(table)
                            .key(key(id))
                            .consistentRead(true)
                            .projectionExpression(V + ", " + RVN)
                            .expressionAttributeNames(
                                Map.of(
                                    V, config.valueAttribute(), RVN, config.versionAttribute()))));
    if (!response.hasItem()) {
      return Option.none();
    }
    Map<String, AttributeValue> item = response.item();
    AttributeValue rvn = item.get(config.versionAttribute());
    AttributeValue value = item.get(config.valueAttribute());
    if (rvn == null || rvn.s() == null || value == null) {
      throw new IllegalStateException(
          "Item \""
              + id
              + "\" of table \""
              + table
              + "\" has no string attribute \""
              + config.versionAttribute()
              + "\" or no attribute \""
              + config.valueAttribute()
              + "\": it was not written by this store. Write it with insert(), or configure the"
              + " attribute names the table uses.");
    }
    T decoded;
    try {
      decoded = codec.decode(value);
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(
          "Attribute \""
              + config.valueAttribute()
              + "\" of item \""
              + id
              + "\" in table \""
              + table
              + "\" does not fit "
              + codec
              + ": "
              + e.getMessage(),
          e);
    }
    return Option.some(new Versioned<>(decoded, new Version(rvn.s())));
  }

  private <R> R call(String what, Supplier<R> request) {
    try {
      return request.get();
    } catch (SdkException e) {
      throw DynamoDbFailures.translate(e, what, table, config.keyAttribute());
    }
  }

  private Map<String, AttributeValue> key(String id) {
    return Map.of(config.keyAttribute(), AttributeValue.fromS(id));
  }

  private AttributeValue encode(T value) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The value is null: a versioned store holds a value per item; to remove an item use"
              + " delete(id, version).");
    }
    return Objects.requireNonNull(codec.encode(value), () -> codec + " encoded a value as null");
  }

  private static void requireId(String id) {
    DynamoDbNames.requirePartitionKey("item id", id);
  }

  private static void requireVersion(Version expected) {
    if (expected == null) {
      throw new IllegalArgumentException(
          "The expected version is null: pass the version returned by read(), insert() or"
              + " compareAndSet().");
    }
  }

  private static Version newVersion() {
    return new Version(UUID.randomUUID().toString());
  }

  private static Counter counter(MeterRegistry registry, String name, String help, Tags tags) {
    return Counter.builder(name).description(help).tags(tags).register(registry);
  }

  @Override
  public String toString() {
    return "DynamoDbVersionedStore[" + table + "]";
  }
}
