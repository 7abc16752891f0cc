package dev.nolock.idempotency;

import java.nio.charset.StandardCharsets;

/**
 * Turns an action's result into the {@link StoredResult} kept with a completed key, and back for a
 * replay. {@code decode(encode(r))} must equal {@code r} for every result the action can return:
 * the replay is what the client sees the second time.
 *
 * @param <R> the action's result type
 */
public interface ResultCodec<R> {

  StoredResult encode(R result);

  R decode(StoredResult stored);

  /** Strings as UTF-8 with status 0. Null is refused. */
  static ResultCodec<String> utf8() {
    return new ResultCodec<>() {
      @Override
      public StoredResult encode(String result) {
        if (result == null) {
          throw new IllegalArgumentException(
              "The action returned null; the utf8 codec stores strings only. Return \"\" or use"
                  + " a codec of your own.");
        }
        return StoredResult.of(0, result.getBytes(StandardCharsets.UTF_8));
      }

      @Override
      public String decode(StoredResult stored) {
        return new String(stored.body(), StandardCharsets.UTF_8);
      }
    };
  }

  /** Stores the {@link StoredResult} itself, for actions that produce status and bytes. */
  static ResultCodec<StoredResult> identity() {
    return new ResultCodec<>() {
      @Override
      public StoredResult encode(StoredResult result) {
        if (result == null) {
          throw new IllegalArgumentException("The action returned null: return a StoredResult.");
        }
        return result;
      }

      @Override
      public StoredResult decode(StoredResult stored) {
        return stored;
      }
    };
  }
}
