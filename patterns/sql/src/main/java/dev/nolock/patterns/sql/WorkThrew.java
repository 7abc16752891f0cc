package dev.nolock.patterns.sql;

import org.jooq.DSLContext;

/**
 * Carries the exception of a caller's {@link SqlWork} out of a jOOQ transaction, so that the entry
 * point that ran the work rethrows the work's own exception, the same instance, and never mistakes
 * it for a database failure.
 *
 * <p>Why it exists: jOOQ's transaction API rolls back on any exception but wraps a checked one in a
 * {@code DataAccessException}, and the entry points translate {@code DataAccessException} into "the
 * database did not answer". A work that threw a checked exception, or a {@code DataAccessException}
 * of its own (a constraint it violated), would otherwise reach the caller as an outage. No library
 * passes a checked exception through jOOQ's lambdas, so this small carrier is written here once,
 * for every module that runs caller work in a transaction.
 *
 * <ol>
 *   <li>Inside the transaction, run the work through {@link #call(SqlWork, DSLContext)}: any
 *       exception it throws leaves wrapped in a {@code WorkThrew}, and jOOQ rolls back.
 *   <li>Outside, catch {@code WorkThrew} before translating database failures and rethrow {@link
 *       #original()}.
 * </ol>
 *
 * A {@code WorkThrew} never reaches a caller of nolock.
 */
public final class WorkThrew extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private WorkThrew(Exception original) {
    // Suppression on: jOOQ adds a failed rollback to the exception it caught, this carrier.
    super(null, original, true, false);
  }

  /** Runs {@code work} on {@code tx}; whatever it throws leaves wrapped in a {@code WorkThrew}. */
  public static <T> T call(SqlWork<T, ?> work, DSLContext tx) {
    try {
      return work.run(tx);
    } catch (Exception e) {
      throw new WorkThrew(e);
    }
  }

  /**
   * The work's exception, with whatever went wrong rolling back added to it as suppressed, as
   * try-with-resources would. Declared {@code X} because the work, an {@code SqlWork<?, X>}, can
   * throw no other checked exception; a caller that declares a wider {@code X} than its work gets
   * the unchecked exception the work threw.
   */
  @SuppressWarnings("unchecked")
  public <X extends Exception> X original() {
    Exception original = (Exception) getCause();
    for (Throwable rollbackFailure : getSuppressed()) {
      original.addSuppressed(rollbackFailure);
    }
    return (X) original;
  }
}
