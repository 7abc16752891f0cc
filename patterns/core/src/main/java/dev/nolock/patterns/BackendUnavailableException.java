package dev.nolock.patterns;

/**
 * The coordination backend (a database, Redis, etcd, ...) could not be reached or failed the
 * request. Nothing is known about whether the request took effect.
 *
 * <p>The caller's action: <b>retry later</b>, with backoff ({@link RetryPolicy}). A holder that
 * cannot renew because of this must treat its lease as ending at its {@link Deadline}, not later.
 */
public class BackendUnavailableException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  public BackendUnavailableException(String message, Throwable cause) {
    super(message, cause);
  }
}
