package dev.nolock.queue;

import dev.nolock.queue.internal.Arguments;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.function.Function;

/**
 * Turns a job's payload into the bytes stored in the {@code payload bytea} column and back. The
 * queue never looks inside the bytes.
 *
 * <p>Two codecs ship: {@link #bytes()} and {@link #utf8()}. For JSON, wrap your own mapper:
 *
 * <pre>{@code
 * PayloadCodec<Invoice> json = PayloadCodec.of(
 *     invoice -> mapper.writeValueAsBytes(invoice),   // wrap checked exceptions yourself
 *     bytes -> mapper.readValue(bytes, Invoice.class));
 * }</pre>
 *
 * @param <T> the payload type
 */
public interface PayloadCodec<T> {

  /** The bytes to store for {@code payload}; never null. */
  byte[] encode(T payload);

  /** The payload stored as {@code bytes}. */
  T decode(byte[] bytes);

  /** Raw bytes, stored as given (the array is copied on the way in and out). */
  static PayloadCodec<byte[]> bytes() {
    return of(byte[]::clone, byte[]::clone);
  }

  /** Strings as UTF-8. */
  static PayloadCodec<String> utf8() {
    return of(s -> s.getBytes(StandardCharsets.UTF_8), b -> new String(b, StandardCharsets.UTF_8));
  }

  /** A codec from two functions, e.g. a JSON mapper's write and read. */
  static <T> PayloadCodec<T> of(Function<T, byte[]> encode, Function<byte[], T> decode) {
    Arguments.required(encode, "The encode function", "a function from payload to bytes");
    Arguments.required(decode, "The decode function", "a function from bytes to payload");
    return new PayloadCodec<>() {
      @Override
      public byte[] encode(T payload) {
        return Objects.requireNonNull(
            encode.apply(Objects.requireNonNull(payload, "payload")),
            "the codec encoded a payload to null; return an empty array instead");
      }

      @Override
      public T decode(byte[] bytes) {
        return decode.apply(bytes);
      }
    };
  }
}
