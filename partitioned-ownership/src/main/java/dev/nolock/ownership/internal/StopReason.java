package dev.nolock.ownership.internal;

import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.sql.SqlErrors;
import org.jooq.exception.DataAccessException;

/**
 * The one line a runner or pipeline logs when its loop stops on a failure, without the data the
 * failure's causes may carry. The loop's own exceptions (nolock's, naming the record; Kafka's,
 * naming the partition and offset) keep their message; a database error keeps the server's primary
 * message ({@link SqlErrors#serverMessage(DataAccessException)}); an {@link Error} and every cause
 * (the handler's or the transform's exception, a deserializer's) are named by their classes only
 * ({@link ErrorDescriber#classNames()}), because their messages quote the records they were working
 * on. The whole exception is the component's {@code failure()}.
 */
public final class StopReason {

  private StopReason() {}

  /** The line for {@code failure}. */
  public static String describe(Throwable failure) {
    String top;
    if (failure instanceof DataAccessException e) {
      top = e.getClass().getName() + ": " + SqlErrors.serverMessage(e);
    } else if (failure instanceof Error || failure.getMessage() == null) {
      top = failure.getClass().getName();
    } else {
      top = failure.getClass().getName() + ": " + failure.getMessage();
    }
    Throwable cause = failure.getCause();
    return cause == null || cause == failure
        ? top
        : top + "; caused by " + ErrorDescriber.classNames().describe(cause);
  }
}
