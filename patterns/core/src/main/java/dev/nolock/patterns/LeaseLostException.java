package dev.nolock.patterns;

/**
 * This process no longer holds the lease, or cannot be sure it will still hold it when its write
 * lands.
 *
 * <p>The only correct action: <b>stop writing now</b>. Do not retry the write with the same lease;
 * re-acquire (getting a new {@link FencingToken}) and re-read whatever the write was based on,
 * because the next holder may have changed it.
 */
public class LeaseLostException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  public LeaseLostException(String message) {
    super(message);
  }

  public LeaseLostException(String message, Throwable cause) {
    super(message, cause);
  }
}
