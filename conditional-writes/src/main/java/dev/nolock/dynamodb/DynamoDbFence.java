package dev.nolock.dynamodb;

import dev.nolock.dynamodb.ConditionalWrites.Applied;
import dev.nolock.dynamodb.ConditionalWrites.Outcome;
import dev.nolock.dynamodb.ConditionalWrites.Refused;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.StringJoiner;
import java.util.function.IntFunction;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;

/**
 * The resource-side check for one DynamoDB item, beside the SQL {@code
 * dev.nolock.patterns.sql.Fence} and the Redis fence: a write that carries a stale {@link
 * FencingToken} is refused by DynamoDB itself, whatever the writer believes about its lease.
 *
 * <p><b>A per-item fence.</b> The token lives in the guarded item ({@code fence_token}, {@code
 * fence_owner}), so it guards exactly that one item. That is enough when the lock protects exactly
 * that item: a lock per order, and the order's item is the only thing written under it. It is
 * <em>not</em> enough when a lock guards several items (or an item and something else): a stale
 * holder would be refused only on the items the new holder has already written, and could still
 * write the ones it has not touched yet. Then the resource must remember the highest token per
 * <em>lock name</em> and check it in the same atomic step as the data writes: the SQL {@code Fence}
 * (one fence row per lock name, advanced in the data's transaction) for data in PostgreSQL. On
 * DynamoDB that would take a transaction ({@code TransactWriteItems} with a {@code ConditionCheck}
 * on a fence item per lock name); this library does not offer it because the local test server
 * cannot run transactions, so nothing here would prove it.
 *
 * <p>Guarantee: once a write with token {@code t} from owner {@code o} went through this fence on
 * an item, no write with a lower token, and none with {@code t} from another owner, goes through it
 * on that item. A refused write changes nothing.
 *
 * <p>Algorithm of {@link #put} and {@link #update}, one conditional request each:
 *
 * <ol>
 *   <li>Write the item (or its attributes) together with {@code #token = :t, #owner = :o}, on
 *       condition {@code attribute_not_exists(#token) OR #token < :t OR (#token = :t AND #owner =
 *       :o)}. DynamoDB checks and writes atomically, per item. The request goes out with the AWS
 *       SDK's retries off; an attempt that gets no answer (or a server error) is resent here, up to
 *       three attempts. A resend of a write that landed passes the condition again (same token,
 *       same owner) and writes the same attributes again.
 *   <li>If the condition failed after an attempt whose answer was lost, a newer token (or another
 *       owner's equal one) wrote the item in between, maybe after this write landed: nothing can
 *       tell, so the outcome is unknown, a {@link BackendUnavailableException}, never a rejection.
 *       Either way the lease no longer writes this item.
 *   <li>If the condition failed otherwise, read the item's token and owner with a consistent {@code
 *       GetItem}, count the rejection and return it as a {@link FenceRejection}. (If the fence
 *       attributes vanished meanwhile, because the item was deleted, the write is tried again, at
 *       most three times in all.)
 * </ol>
 *
 * Equal tokens pass only for the same owner: a lock backend can hand a token out again (a lease
 * item deleted and re-created, a counter lost), and the fence must not take the second holder for
 * the first.
 *
 * <p><b>Never delete a fenced item</b>: the fence would be forgotten with it, and a stale holder's
 * {@code put} would create it again. Mark it deleted through the fence instead (an {@code update}
 * that sets a tombstone attribute).
 *
 * <p>Immutable and thread-safe; the client is the caller's. Failures of DynamoDB or the network are
 * {@link BackendUnavailableException}s (whether the write took effect is then unknown); a missing
 * table an {@link IllegalStateException}; bad input an {@link IllegalArgumentException}.
 */
public final class DynamoDbFence {

  private static final String TOKEN = "#token";
  private static final String OWNER = "#owner";
  private static final String CONDITION =
      "attribute_not_exists("
          + TOKEN
          + ") OR "
          + TOKEN
          + " < :token OR ("
          + TOKEN
          + " = :token AND "
          + OWNER
          + " = :owner)";
  private static final int MAX_WRITES = 3;

  private final DynamoDbClient client;
  private final DynamoDbFenceConfig config;

  private DynamoDbFence(DynamoDbClient client, DynamoDbFenceConfig config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
  }

  /** A fence on {@code config}'s table; the caller keeps owning the client. */
  public static DynamoDbFence create(DynamoDbClient client, DynamoDbFenceConfig config) {
    return new DynamoDbFence(client, config);
  }

  public DynamoDbFenceConfig config() {
    return config;
  }

  /**
   * Replaces the whole item at {@code key} with {@code key + attributes + fence attributes}, if
   * {@code lease}'s token is not stale for that item ({@code PutItem}).
   *
   * @param key the item's primary key (partition key, and sort key if the table has one)
   * @param attributes the other attributes of the new item; not the key or fence attributes
   * @return right (null) when written; the rejection otherwise, with nothing written
   */
  public Either<FenceRejection, Void> put(
      Lease lease, Map<String, AttributeValue> key, Map<String, AttributeValue> attributes) {
    Objects.requireNonNull(lease, "lease");
    requireKey(key);
    requireAttributes(key, attributes);
    Map<String, AttributeValue> item = new HashMap<>(attributes);
    item.putAll(key);
    item.put(config.tokenAttribute(), token(lease));
    item.put(config.ownerAttribute(), AttributeValue.fromS(lease.owner()));
    return write(
        lease,
        key,
        "put item " + key.values(),
        attempt ->
            client.putItem(
                put ->
                    put.tableName(config.tableName())
                        .item(item)
                        .conditionExpression(CONDITION)
                        .expressionAttributeNames(fenceNames())
                        .expressionAttributeValues(fenceValues(lease))
                        .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT)));
  }

  /**
   * Sets {@code attributes} on the item at {@code key} (creating it if missing) and advances its
   * fence, if {@code lease}'s token is not stale for that item ({@code UpdateItem}); attributes not
   * named are left alone. With no attributes, only the fence advances: a way to claim the item for
   * the new holder before it writes anything else.
   *
   * @return right (null) when written; the rejection otherwise, with nothing written
   */
  public Either<FenceRejection, Void> update(
      Lease lease, Map<String, AttributeValue> key, Map<String, AttributeValue> attributes) {
    Objects.requireNonNull(lease, "lease");
    requireKey(key);
    requireAttributes(key, attributes);
    Map<String, String> names = fenceNames();
    Map<String, AttributeValue> values = fenceValues(lease);
    StringJoiner set = new StringJoiner(", ", "SET ", "");
    set.add(TOKEN + " = :token").add(OWNER + " = :owner");
    int i = 0;
    for (Map.Entry<String, AttributeValue> attribute : attributes.entrySet()) {
      names.put("#a" + i, attribute.getKey());
      values.put(":a" + i, attribute.getValue());
      set.add("#a" + i + " = :a" + i);
      i++;
    }
    return write(
        lease,
        key,
        "update item " + key.values(),
        attempt ->
            client.updateItem(
                update ->
                    update
                        .tableName(config.tableName())
                        .key(key)
                        .updateExpression(set.toString())
                        .conditionExpression(CONDITION)
                        .expressionAttributeNames(names)
                        .expressionAttributeValues(values)
                        .overrideConfiguration(ConditionalWrites.ONE_ATTEMPT)));
  }

  private Either<FenceRejection, Void> write(
      Lease lease, Map<String, AttributeValue> key, String what, IntFunction<?> request) {
    for (int round = 1; ; round++) {
      Outcome<?> outcome =
          ConditionalWrites.send(LeaseClock.system(), request, e -> translate(e, what, key));
      if (outcome instanceof Applied<?>) {
        return Either.right(null);
      }
      if (((Refused<?>) outcome).afterAmbiguousAttempt()) {
        throw new BackendUnavailableException(
            "DynamoDB did not answer an attempt to "
                + what
                + " through the fence of table \""
                + config.tableName()
                + "\", and the resend was refused: a newer token (or another owner's equal one)"
                + " wrote the item in between, possibly after the first attempt landed. Whether"
                + " this write took effect is unknown; either way lease "
                + lease.token()
                + " no longer writes this item: stop writing under it.",
            null);
      }
      Option<FenceRejection> rejection = currentFence(lease, key, what);
      if (rejection.isDefined()) {
        config.metrics().fenceRejected();
        return Either.left(rejection.get());
      }
      if (round >= MAX_WRITES) {
        throw new IllegalStateException(
            "The fence of "
                + key.values()
                + " in table \""
                + config.tableName()
                + "\" refused"
                + " the write "
                + MAX_WRITES
                + " times, yet each time the item had no fence"
                + " token afterwards: something deletes the item or its \""
                + config.tokenAttribute()
                + "\" attribute. A fenced item must never be deleted.");
      }
    }
  }

  /** The fence the item holds now, or none when it has no token (it was deleted meanwhile). */
  private Option<FenceRejection> currentFence(
      Lease lease, Map<String, AttributeValue> key, String what) {
    GetItemResponse response;
    try {
      response =
          client.getItem(
              get ->
                  get.tableName(config.tableName())
                      .key(key)
                      .consistentRead(true)
                      .projectionExpression(TOKEN + ", " + OWNER)
                      .expressionAttributeNames(
                          Map.of(TOKEN, config.tokenAttribute(), OWNER, config.ownerAttribute())));
    } catch (SdkException e) {
      throw translate(e, "read the fence after a refused " + what, key);
    }
    AttributeValue token = response.hasItem() ? response.item().get(config.tokenAttribute()) : null;
    if (token == null || token.n() == null) {
      return Option.none();
    }
    AttributeValue owner = response.item().get(config.ownerAttribute());
    return Option.some(
        new FenceRejection(
            lease.name(),
            lease.token(),
            lease.owner(),
            FencingToken.of(Long.parseLong(token.n())),
            owner != null && owner.s() != null ? owner.s() : "(unknown)"));
  }

  private Map<String, String> fenceNames() {
    Map<String, String> names = new LinkedHashMap<>();
    names.put(TOKEN, config.tokenAttribute());
    names.put(OWNER, config.ownerAttribute());
    return names;
  }

  private static Map<String, AttributeValue> fenceValues(Lease lease) {
    Map<String, AttributeValue> values = new LinkedHashMap<>();
    values.put(":token", token(lease));
    values.put(":owner", AttributeValue.fromS(lease.owner()));
    return values;
  }

  private static AttributeValue token(Lease lease) {
    return AttributeValue.fromN(Long.toString(lease.token().value()));
  }

  private void requireKey(Map<String, AttributeValue> key) {
    Objects.requireNonNull(key, "key");
    if (key.isEmpty() || key.size() > 2) {
      throw new IllegalArgumentException(
          "The key has "
              + key.size()
              + " attributes: pass the item's partition key, and its sort key if the table has one,"
              + " e.g. Map.of(\"pk\", AttributeValue.fromS(\"order-42\")).");
    }
    key.forEach(
        (name, value) -> {
          DynamoDbNames.requireAttributeName("key attribute", name);
          Objects.requireNonNull(value, () -> "the value of key attribute " + name);
          if (isFenceAttribute(name)) {
            throw new IllegalArgumentException(
                "The key attribute \""
                    + name
                    + "\" is one of the fence's attributes: rename the"
                    + " fence's token or owner attribute in DynamoDbFenceConfig.");
          }
        });
  }

  private void requireAttributes(
      Map<String, AttributeValue> key, Map<String, AttributeValue> attributes) {
    Objects.requireNonNull(attributes, "attributes");
    attributes.forEach(
        (name, value) -> {
          DynamoDbNames.requireAttributeName("attribute", name);
          Objects.requireNonNull(value, () -> "the value of attribute " + name);
          if (isFenceAttribute(name)) {
            throw new IllegalArgumentException(
                "The attribute \""
                    + name
                    + "\" is the fence's own: the fence writes it. Pass only"
                    + " the data attributes.");
          }
          if (key.containsKey(name)) {
            throw new IllegalArgumentException(
                "The attribute \"" + name + "\" is part of the key: pass it in the key only.");
          }
        });
  }

  private boolean isFenceAttribute(String name) {
    return name.equals(config.tokenAttribute()) || name.equals(config.ownerAttribute());
  }

  private RuntimeException translate(SdkException e, String what, Map<String, AttributeValue> key) {
    return DynamoDbFailures.translateOnUserTable(
        e, what + " through the fence", config.tableName(), String.join("/", key.keySet()));
  }

  @Override
  public String toString() {
    return "DynamoDbFence[" + config.tableName() + "]";
  }
}
