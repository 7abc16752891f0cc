package dev.nolock.dynamodb.internal;

import dev.nolock.dynamodb.AttributeCodec;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/** The codecs {@link AttributeCodec} offers. */
public final class Codecs {

  /** {@code long} as {@code N}. */
  public static final AttributeCodec<Long> LONGS =
      new AttributeCodec<>() {
        @Override
        public AttributeValue encode(Long value) {
          return AttributeValue.fromN(Long.toString(value));
        }

        @Override
        public Long decode(AttributeValue attribute) {
          String n = attribute.n();
          if (n == null) {
            throw new IllegalArgumentException(
                "expected a number (N) attribute, found " + attribute.type());
          }
          try {
            return Long.parseLong(n);
          } catch (NumberFormatException e) {
            throw new IllegalArgumentException("the number " + n + " is not a whole long", e);
          }
        }

        @Override
        public String toString() {
          return "AttributeCodec.longs()";
        }
      };

  /** {@code String} as {@code S}. */
  public static final AttributeCodec<String> STRINGS =
      new AttributeCodec<>() {
        @Override
        public AttributeValue encode(String value) {
          return AttributeValue.fromS(value);
        }

        @Override
        public String decode(AttributeValue attribute) {
          String s = attribute.s();
          if (s == null) {
            throw new IllegalArgumentException(
                "expected a string (S) attribute, found " + attribute.type());
          }
          return s;
        }

        @Override
        public String toString() {
          return "AttributeCodec.strings()";
        }
      };

  private Codecs() {}
}
