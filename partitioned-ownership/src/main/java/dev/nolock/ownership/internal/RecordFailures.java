package dev.nolock.ownership.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Causes;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.List;
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
 * <p>The rule, first match wins, each looking at the whole cause chain (each exception once: a
 * chain can loop):
 *
 * <ol>
 *   <li>An {@link Error}, an {@link InterruptedException} or Kafka's {@link InterruptException},
 *       the thread's interrupt flag set, or an outermost SQLState that {@link SqlErrors} calls
 *       {@code SCHEMA}: {@link Verdict#STOP}.
 *   <li>Without a dead-letter topic, a deserializer, transform or serializer failure: {@link
 *       Verdict#STOP}, as before dead-letter topics existed.
 *   <li>A transient failure: a SQL one ({@link SQLTransientException}, {@link
 *       SQLRecoverableException}, a SQLState {@link SqlErrors} calls {@code TRANSIENT}), a Kafka
 *       {@link RetriableException}, nolock's {@link BackendUnavailableException} or {@link
 *       LeaseLostException}, or a network failure (an exception of {@code java.net} but a malformed
 *       URL or URI, an {@link InterruptedIOException}, an {@link SSLException}): {@link
 *       Verdict#RETRY}. The user's predicate cannot override this: a broad one would otherwise skip
 *       every record while the database is down.
 *   <li>With a dead-letter topic, the user's {@code deadLetterWhen} predicate marks the failure:
 *       {@link Verdict#DEAD_LETTER}. Nothing else is ever dead-lettered: no exception type tells
 *       for sure that the record is at fault. A parse error may come from a schema registry's
 *       truncated answer or a stale connection ({@code EOFException} under an HTTP client's
 *       exception), a data-binding error from a deploy, a SQL data error (class 22 or 23) from a
 *       migration that added a constraint or a writer outside nolock; the user knows their
 *       deserializers and handlers, nolock does not.
 *   <li>A handler failure with any other {@link IOException} in the chain: {@link Verdict#RETRY},
 *       as before dead-letter topics existed ({@link SqlErrors#isTransient} took every {@code
 *       IOException} as transient). User code's I/O failures are mostly a client's lost connection
 *       ({@code NoHttpResponseException} is no {@code java.net} class). A handler that parses the
 *       record itself with a parser whose errors are {@code IOException}s (Jackson 2) would retry a
 *       malformed record forever: it catches its parse error, or marks it with the predicate.
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
   * The verdict on {@code failure} in {@code stage}; see the class Javadoc. Calls {@code
   * deadLetterWhen} at most once, and only with a dead-letter topic.
   *
   * @param where the record, as {@code topic-partition@offset}, for the message when the predicate
   *     throws
   * @param deadLetterTopic whether a dead-letter topic is configured
   * @param deadLetterWhen the user's poison predicate
   * @throws PredicateFailedException when the predicate throws: naming the record, caused by {@code
   *     failure}, with the predicate's exception suppressed, so that neither hides the other (the
   *     runner stops)
   */
  public static Verdict classify(
      Throwable failure,
      RecordFailedException.Stage stage,
      String where,
      boolean deadLetterTopic,
      Predicate<? super Throwable> deadLetterWhen) {
    List<Throwable> chain = Causes.of(failure);
    if (Thread.currentThread().isInterrupted()
        || chain.stream().anyMatch(RecordFailures::stops)
        || SqlErrors.classify(outermostState(chain)) == SqlErrors.Kind.SCHEMA) {
      return Verdict.STOP;
    }
    if (!deadLetterTopic && stage != RecordFailedException.Stage.HANDLER) {
      return Verdict.STOP;
    }
    if (chain.stream().anyMatch(RecordFailures::transientFailure)) {
      return Verdict.RETRY;
    }
    if (deadLetterTopic && marked(failure, stage, where, deadLetterWhen)) {
      return Verdict.DEAD_LETTER;
    }
    if (stage == RecordFailedException.Stage.HANDLER
        && chain.stream().anyMatch(t -> t instanceof IOException)) {
      return Verdict.RETRY;
    }
    return Verdict.STOP;
  }

  private static boolean marked(
      Throwable failure,
      RecordFailedException.Stage stage,
      String where,
      Predicate<? super Throwable> when) {
    try {
      return when.test(failure);
    } catch (RuntimeException
        | Error e) { // StackOverflowError: a predicate walking a looping chain
      PredicateFailedException thrown =
          new PredicateFailedException(
              "deadLetterWhen threw "
                  + e.getClass().getName()
                  + " while classifying the "
                  + stage.header()
                  + " failure of "
                  + where
                  + " (the cause; the predicate's exception is suppressed). The runner stops:"
                  + " make the predicate total, e.g. return false for exceptions it does not know.",
              failure);
      thrown.addSuppressed(e);
      throw thrown;
    }
  }

  /**
   * The user's {@code deadLetterWhen} threw: the runner stops, and a pipeline aborts its
   * transaction first.
   */
  public static final class PredicateFailedException extends IllegalStateException {
    private static final long serialVersionUID = 1L;

    PredicateFailedException(String message, Throwable cause) {
      super(message, cause);
    }
  }

  private static boolean stops(Throwable t) {
    return t instanceof Error
        || t instanceof InterruptedException
        || t instanceof InterruptException;
  }

  private static boolean transientFailure(Throwable t) {
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
  private static String outermostState(List<Throwable> chain) {
    for (Throwable t : chain) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
    }
    return !chain.isEmpty() && chain.get(0) instanceof DataAccessException dae
        ? dae.sqlState()
        : null;
  }
}
