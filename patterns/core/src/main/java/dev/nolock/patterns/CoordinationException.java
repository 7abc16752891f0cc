package dev.nolock.patterns;

/**
 * The root of the exceptions nolock throws when something is broken, as opposed to a race that was
 * lost (a value) or a call that was wrong ({@link IllegalArgumentException}, {@link
 * IllegalStateException}). Each subclass is named after what the caller must do.
 */
public abstract class CoordinationException extends RuntimeException {

  private static final long serialVersionUID = 1L;

  protected CoordinationException(String message) {
    super(message);
  }

  protected CoordinationException(String message, Throwable cause) {
    super(message, cause);
  }
}
