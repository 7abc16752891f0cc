package dev.nolock.ownership.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.IOException;
import java.util.function.Predicate;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;

/**
 * Decides what a record's failure (a deserializer's, the handler's, the transform's, a
 * serializer's) means, so that a dead-letter topic receives only poison records: a failure that a
 * later retry can cure, or that no record can get past, is not the record's fault.
 *
 * <p>The rule, first match wins, each looking at the whole cause chain:
 *
 * <ol>
 *   <li>An {@link Error}, an {@link InterruptedException} or Kafka's {@link InterruptException}, or
 *       the thread's interrupt flag set: {@link Verdict#STOP}, as without a dead-letter topic.
 *   <li>{@link SqlErrors#classify} says {@code TRANSIENT} (which covers {@link IOException}), or a
 *       Kafka {@link RetriableException}, or a {@link BackendUnavailableException} (nolock's
 *       backends: "retry later"): {@link Verdict#RETRY}: back off and apply the record again.
 *   <li>{@link SqlErrors#classify} says {@code SCHEMA} (a missing table during a deploy, a revoked
 *       grant): {@link Verdict#STOP}: every record would fail the same way until someone fixes it.
 *   <li>Anything else: {@link Verdict#DEAD_LETTER}, the record itself is the problem.
 * </ol>
 */
public final class RecordFailures {

  /** What the runner does with a record that failed. */
  public enum Verdict {
    /** Back off and apply the same record again; never dead-lettered. */
    RETRY,
    /** Stop the runner, with or without a dead-letter topic. */
    STOP,
    /** The record is poison: dead-letter it if a topic is set, else stop. */
    DEAD_LETTER
  }

  private RecordFailures() {}

  public static Verdict classify(Throwable failure) {
    if (Thread.currentThread().isInterrupted() || any(failure, RecordFailures::stops)) {
      return Verdict.STOP;
    }
    if (SqlErrors.classify(failure) == SqlErrors.Kind.TRANSIENT
        || any(failure, RecordFailures::retriable)) {
      return Verdict.RETRY;
    }
    if (SqlErrors.classify(failure) == SqlErrors.Kind.SCHEMA) {
      return Verdict.STOP;
    }
    return Verdict.DEAD_LETTER;
  }

  private static boolean stops(Throwable t) {
    return t instanceof Error
        || t instanceof InterruptedException
        || t instanceof InterruptException;
  }

  private static boolean retriable(Throwable t) {
    return t instanceof IOException
        || t instanceof RetriableException
        || t instanceof BackendUnavailableException;
  }

  private static boolean any(Throwable failure, Predicate<Throwable> test) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (test.test(t)) {
        return true;
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return false;
  }
}
