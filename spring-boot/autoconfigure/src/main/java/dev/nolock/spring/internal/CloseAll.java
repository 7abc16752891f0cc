package dev.nolock.spring.internal;

import java.util.List;
import java.util.function.Consumer;

/** Closes every component of a list even when one of them fails to close. */
final class CloseAll {

  private CloseAll() {}

  /**
   * Calls {@code close} on each item in order; the first exception is thrown once every item was
   * tried, the later ones added to it as suppressed. One that fails must not leave the rest running
   * (holding leases and claims until the JVM exits).
   */
  static <T> void each(List<T> items, Consumer<? super T> close) {
    RuntimeException first = null;
    for (T item : items) {
      try {
        close.accept(item);
      } catch (RuntimeException e) {
        if (first == null) {
          first = e;
        } else {
          first.addSuppressed(e);
        }
      }
    }
    if (first != null) {
      throw first;
    }
  }
}
