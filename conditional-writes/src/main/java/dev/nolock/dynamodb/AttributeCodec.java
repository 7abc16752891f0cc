package dev.nolock.dynamodb;

import dev.nolock.dynamodb.internal.Codecs;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * How a {@link DynamoDbVersionedStore} stores its values: one value as one DynamoDB attribute.
 * Implementations must be stateless and thread-safe, and {@code decode(encode(v))} must equal
 * {@code v}.
 *
 * @param <T> the value type
 */
public interface AttributeCodec<T> {

  /** The attribute that stores {@code value} (never null). */
  AttributeValue encode(T value);

  /**
   * The value stored in {@code attribute}.
   *
   * @throws IllegalArgumentException when the attribute holds another DynamoDB type than this codec
   *     writes (the item was written by something else)
   */
  T decode(AttributeValue attribute);

  /** A {@code long} as a DynamoDB number ({@code N}), exact over the whole {@code long} range. */
  static AttributeCodec<Long> longs() {
    return Codecs.LONGS;
  }

  /** A string as a DynamoDB string ({@code S}); DynamoDB refuses strings over 400 KB. */
  static AttributeCodec<String> strings() {
    return Codecs.STRINGS;
  }
}
