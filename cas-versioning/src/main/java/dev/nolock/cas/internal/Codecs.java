package dev.nolock.cas.internal;

import dev.nolock.cas.ValueCodec;
import java.util.Objects;
import java.util.function.Function;
import org.jooq.DataType;
import org.jooq.SQLDialect;
import org.jooq.exception.SQLDialectNotSupportedException;
import org.jooq.impl.DefaultDataType;

/** The ready {@link ValueCodec}s and the SQL type lookup they share with the key type. */
public final class Codecs {

  public static final ValueCodec<Long, Long> LONGS =
      new Identity<>(Long.class, "ValueCodec.longs()");

  public static final ValueCodec<String, String> STRINGS =
      new Identity<>(String.class, "ValueCodec.strings()");

  private Codecs() {}

  /** See {@link ValueCodec#of}. */
  public static <T, S> ValueCodec<T, S> of(
      Class<S> storedType,
      Function<? super T, ? extends S> encode,
      Function<? super S, ? extends T> decode) {
    dataType("value codec's stored type", storedType);
    Objects.requireNonNull(encode, "encode");
    Objects.requireNonNull(decode, "decode");
    return new ValueCodec<>() {
      @Override
      public Class<S> storedType() {
        return storedType;
      }

      @Override
      public S encode(T value) {
        return encode.apply(value);
      }

      @Override
      public T decode(S stored) {
        return decode.apply(stored);
      }

      @Override
      public String toString() {
        return "ValueCodec.of(" + storedType.getSimpleName() + ")";
      }
    };
  }

  /**
   * The PostgreSQL type jOOQ binds {@code type} as.
   *
   * @param what what the type is for, for the message
   * @throws IllegalArgumentException when jOOQ has no PostgreSQL type for it
   */
  public static <S> DataType<S> dataType(String what, Class<S> type) {
    Objects.requireNonNull(type, what);
    DataType<S> dataType;
    try {
      dataType = DefaultDataType.getDataType(SQLDialect.POSTGRES, type);
    } catch (SQLDialectNotSupportedException e) {
      dataType = null;
    }
    if (dataType == null || dataType.isOther()) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " "
              + type.getName()
              + " has no PostgreSQL type in jOOQ: use a type the"
              + " driver binds directly, e.g. String, Long, Integer, byte[], BigDecimal, UUID or"
              + " org.jooq.JSONB, and convert to it in the codec.");
    }
    return dataType;
  }

  private record Identity<S>(Class<S> storedType, String name) implements ValueCodec<S, S> {
    @Override
    public S encode(S value) {
      return value;
    }

    @Override
    public S decode(S stored) {
      return stored;
    }

    @Override
    public String toString() {
      return name;
    }
  }
}
