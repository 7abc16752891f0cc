package dev.nolock.spring.internal;

import java.util.function.Supplier;

/**
 * Runs a nolock builder call for one property and, when the builder refuses the value, fails
 * start-up naming the property: the builder's message says how to fix the value, the property says
 * where.
 */
public final class PropertyCheck {

  private PropertyCheck() {}

  /**
   * What {@code call} returns, or its refusal as an {@link IllegalStateException} whose message is
   * {@code "<property>: <the builder's message>"}.
   */
  public static <T> T named(String property, Supplier<T> call) {
    try {
      return call.get();
    } catch (IllegalArgumentException e) {
      throw new IllegalStateException(property + ": " + e.getMessage(), e);
    }
  }
}
