package dev.nolock.queue.internal;

/**
 * The null check of the public configuration methods: a missing argument is a configuration error
 * ({@link IllegalArgumentException}) whose message says what to pass, never a {@link
 * NullPointerException}.
 */
public final class Arguments {

  private Arguments() {}

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming {@code what} and an example of
   * what to pass instead.
   */
  public static <V> V required(V value, String what, String example) {
    if (value == null) {
      throw new IllegalArgumentException(what + " is null: pass " + example + ".");
    }
    return value;
  }
}
