package dev.nolock.cas;

import dev.nolock.cas.internal.Codecs;
import java.util.Objects;
import java.util.function.Function;
import org.jooq.JSONB;

/**
 * How a {@link VersionColumnStore} stores its values: one value in the value column, as a type the
 * JDBC driver binds directly ({@code S}). Implementations must be stateless and thread-safe, and
 * {@code decode(encode(v))} must equal {@code v}.
 *
 * <p>Ready codecs: {@link #longs()} for a {@code bigint} column, {@link #strings()} for {@code
 * text}/{@code varchar}, and {@link #json} for a {@code jsonb} column with the JSON mapper of your
 * choice (nolock depends on none). For anything else, {@link #of} pairs two functions with a stored
 * type jOOQ knows ({@code String}, {@code Long}, {@code Integer}, {@code byte[]}, {@code
 * BigDecimal}, {@code UUID}, {@link JSONB}, ...).
 *
 * @param <T> the value type the store hands out
 * @param <S> the type bound to the value column, e.g. {@code String} for {@code text}
 */
public interface ValueCodec<T, S> {

  /** The Java type bound to the value column; it decides the SQL type jOOQ binds it as. */
  Class<S> storedType();

  /** The column value for {@code value} (never null). */
  S encode(T value);

  /**
   * The value stored as {@code stored}.
   *
   * @throws IllegalArgumentException when the column holds something this codec did not write
   */
  T decode(S stored);

  /** A {@code long} in a {@code bigint} column. */
  static ValueCodec<Long, Long> longs() {
    return Codecs.LONGS;
  }

  /** A string in a {@code text} or {@code varchar} column. */
  static ValueCodec<String, String> strings() {
    return Codecs.STRINGS;
  }

  /**
   * A value as JSON in a {@code jsonb} column, with your own mapper, for example Jackson's: {@code
   * ValueCodec.json(mapper::writeValueAsString, s -> mapper.readValue(s, Order.class))} (wrap its
   * checked exceptions). PostgreSQL normalises {@code jsonb} (key order, whitespace), which is
   * harmless as long as {@code fromJson(toJson(v))} equals {@code v}.
   */
  static <T> ValueCodec<T, JSONB> json(
      Function<? super T, String> toJson, Function<String, ? extends T> fromJson) {
    Objects.requireNonNull(toJson, "toJson");
    Objects.requireNonNull(fromJson, "fromJson");
    return of(
        JSONB.class,
        value -> JSONB.valueOf(toJson.apply(value)),
        stored -> fromJson.apply(stored.data()));
  }

  /**
   * A codec from two functions.
   *
   * @param storedType the type bound to the column, one jOOQ maps to a SQL type
   * @throws IllegalArgumentException when jOOQ knows no SQL type for {@code storedType}
   */
  static <T, S> ValueCodec<T, S> of(
      Class<S> storedType,
      Function<? super T, ? extends S> encode,
      Function<? super S, ? extends T> decode) {
    return Codecs.of(storedType, encode, decode);
  }
}
