package dev.nolock.testkit;

/**
 * A test server did not accept a TCP connection, so the test cannot run and fails (it is never
 * skipped: a suite that skips when its server is missing proves nothing). The message names the
 * endpoint variable and the {@code scripts/services up NAME} command that starts the server; the
 * only fix is to start it or point the variable at one that runs.
 */
public final class ServerUnreachableException extends IllegalStateException {

  private static final long serialVersionUID = 1L;

  public ServerUnreachableException(String message, Throwable cause) {
    super(message, cause);
  }
}
