package dev.nolock.ownership.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.InterruptedIOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.function.Predicate;
import javax.net.ssl.SSLException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;
import org.jooq.exception.DataAccessException;

/**
 * Decides what a record's failure (a deserializer's, the handler's, the transform's, a
 * serializer's) means. The principle: dead-letter only what is known to be the record's fault;
 * anything unknown behaves as without a dead-letter topic, for silently skipping a good record is
 * the worst outcome.
 *
 * <p>The rule, first match wins, each looking at the whole cause chain:
 *
 * <ol>
 *   <li>An {@link Error}, an {@link InterruptedException} or Kafka's {@link InterruptException},
 *       the thread's interrupt flag set, or an outermost SQLState that {@link SqlErrors} calls
 *       {@code SCHEMA}: {@link Verdict#STOP}.
 *   <li>Without a dead-letter topic, only a handler failure goes on; any other stage stops, as
 *       before dead-letter topics existed.
 *   <li>A transient SQL failure ({@link SQLTransientException}, {@link SQLRecoverableException}, a
 *       SQLState {@link SqlErrors} calls {@code TRANSIENT}), a Kafka {@link RetriableException},
 *       nolock's {@link BackendUnavailableException} or {@link LeaseLostException}, or a network
 *       failure (an exception of {@code java.net} but a malformed URL or URI, an {@link
 *       InterruptedIOException}, an {@link SSLException}): {@link Verdict#RETRY}. Other {@code
 *       IOException}s (a JSON or protobuf parse error, {@code EOFException}, {@code
 *       CharacterCodingException}) are bad data, not a network fault.
 *   <li>Without a dead-letter topic: {@link Verdict#STOP}.
 *   <li>A deserializer or serializer failure (bad bytes in or out are the record's fault): {@link
 *       Verdict#DEAD_LETTER}.
 *   <li>A handler or transform failure with a SQLState of class 22 or 23 (a value or constraint the
 *       record broke; {@link SqlErrors} {@code DATA}), or one the user's {@code deadLetterWhen}
 *       predicate marks as poison: {@link Verdict#DEAD_LETTER}.
 *   <li>Anything else: {@link Verdict#STOP}, as without a dead-letter topic.
 * </ol>
 */
public final class RecordFailures {

  /** What the runner does with a record that failed. */
  public enum Verdict {
    /** Back off and apply the same record again; never dead-lettered. */
    RETRY,
    /** Stop the runner. */
    STOP,
    /** The record is poison and a dead-letter topic is set: send it there. */
    DEAD_LETTER
  }

  private RecordFailures() {}

  /**
   * The verdict on {@code failure} in {@code stage}; see the class Javadoc.
   *
   * @param deadLetterTopic whether a dead-letter topic is configured
   * @param deadLetterWhen the user's poison predicate, consulted for handler and transform failures
   *     only after steps 1 to 3; an exception it throws propagates (the runner stops)
   */
  public static Verdict classify(
      Throwable failure,
      RecordFailedException.Stage stage,
      boolean deadLetterTopic,
      Predicate<? super Throwable> deadLetterWhen) {
    String state = outermostState(failure);
    if (Thread.currentThread().isInterrupted()
        || any(failure, RecordFailures::stops)
        || SqlErrors.classify(state) == SqlErrors.Kind.SCHEMA) {
      return Verdict.STOP;
    }
    boolean code =
        stage == RecordFailedException.Stage.HANDLER
            || stage == RecordFailedException.Stage.TRANSFORM;
    if (!deadLetterTopic && stage != RecordFailedException.Stage.HANDLER) {
      return Verdict.STOP;
    }
    if (any(failure, RecordFailures::retriable)) {
      return Verdict.RETRY;
    }
    if (!deadLetterTopic) {
      return Verdict.STOP;
    }
    if (!code || SqlErrors.classify(state) == SqlErrors.Kind.DATA || deadLetterWhen.test(failure)) {
      return Verdict.DEAD_LETTER;
    }
    return Verdict.STOP;
  }

  /** Whether {@code failure} would be dead-lettered had a dead-letter topic been configured. */
  public static boolean deadLetterable(
      Throwable failure,
      RecordFailedException.Stage stage,
      Predicate<? super Throwable> deadLetterWhen) {
    return classify(failure, stage, true, deadLetterWhen) == Verdict.DEAD_LETTER;
  }

  private static boolean stops(Throwable t) {
    return t instanceof Error
        || t instanceof InterruptedException
        || t instanceof InterruptException;
  }

  private static boolean retriable(Throwable t) {
    return t instanceof SQLTransientException
        || t instanceof SQLRecoverableException
        || (t instanceof SQLException sql
            && SqlErrors.classify(sql.getSQLState()) == SqlErrors.Kind.TRANSIENT)
        || (t instanceof DataAccessException dae
            && SqlErrors.classify(dae.sqlState()) == SqlErrors.Kind.TRANSIENT)
        || t instanceof RetriableException
        || t instanceof BackendUnavailableException
        || t instanceof LeaseLostException
        || network(t);
  }

  /** A failure of the connection, not of the bytes: a retry over a new connection can succeed. */
  private static boolean network(Throwable t) {
    // A malformed URL or URI is in java.net but is the data's fault: a retry repeats it forever.
    if (t instanceof java.net.MalformedURLException || t instanceof java.net.URISyntaxException) {
      return false;
    }
    // The package catches what has no common type (e.g. java.net.http.HttpTimeoutException); the
    // instanceof checks catch a driver's own subclasses outside it.
    return t.getClass().getName().startsWith("java.net.")
        || t instanceof java.net.SocketException
        || t instanceof java.net.UnknownHostException
        || t instanceof InterruptedIOException
        || t instanceof SSLException;
  }

  /** The outermost SQLState in the chain, as {@link SqlErrors#classify(Throwable)} reads it. */
  private static String outermostState(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
      if (t.getCause() == t) {
        break;
      }
    }
    return failure instanceof DataAccessException dae ? dae.sqlState() : null;
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
