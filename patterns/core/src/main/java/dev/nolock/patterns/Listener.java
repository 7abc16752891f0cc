package dev.nolock.patterns;

import io.vavr.control.Option;

/**
 * A hook that a background component calls, on its own thread, to tell the owner something happened
 * (a lease was lost, a scheduled run ended). It may throw any exception, checked or not: that is
 * this call's failure only. The component logs it (and counts it where it records metrics), then
 * goes on as if the hook had returned: it keeps working and calls the hook again for the next
 * event. An {@link Error} is not caught.
 *
 * <p>An interrupt is not the hook's to keep: when it throws {@link InterruptedException} (a wait in
 * it was interrupted, by a shutdown say), the component logs and counts it as above and sets the
 * calling thread's interrupt flag again, so that the thread's own loop sees the interrupt and stops
 * as it does on any other. A hook that leaves the flag set has the same effect.
 *
 * <p>Keep it quick: the component waits for it before its next step.
 *
 * @param <E> what the component tells
 */
@FunctionalInterface
public interface Listener<E> {

  /** Told that {@code event} happened. */
  void accept(E event) throws Exception;

  /**
   * Tells {@code listener} of {@code event} on the current thread, as every nolock component calls
   * its hooks, and returns what it threw, for the caller to log and count; empty when it returned.
   * An {@link Error} is not caught. When it threw {@link InterruptedException}, the current
   * thread's interrupt flag is set again before this returns: catching the exception cleared it,
   * and the interrupt was meant for the thread (its loop checks the flag), not for the hook.
   *
   * @throws IllegalArgumentException when {@code listener} is null
   */
  static <E> Option<Exception> tell(Listener<? super E> listener, E event) {
    if (listener == null) {
      throw new IllegalArgumentException("The listener is null: pass the hook to call.");
    }
    try {
      listener.accept(event);
      return Option.none();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Option.some(e);
    } catch (Exception e) {
      return Option.some(e);
    }
  }
}
