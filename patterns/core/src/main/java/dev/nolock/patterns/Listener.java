package dev.nolock.patterns;

/**
 * A hook that a background component calls, on its own thread, to tell the owner something happened
 * (a lease was lost, a scheduled run ended). It may throw any exception, checked or not: that is
 * this call's failure only. The component logs it (and counts it where it records metrics), then
 * goes on as if the hook had returned: it keeps working and calls the hook again for the next
 * event. An {@link Error} is not caught.
 *
 * <p>Keep it quick: the component waits for it before its next step.
 *
 * @param <E> what the component tells
 */
@FunctionalInterface
public interface Listener<E> {

  /** Told that {@code event} happened. */
  void accept(E event) throws Exception;
}
