package dev.nolock.ownership.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.nio.BufferUnderflowException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;
import javax.net.ssl.SSLException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.errors.SerializationException;
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
 *       {@link Verdict#DEAD_LETTER}.
 *   <li>A handler or transform failure with any other {@link IOException} in the chain: {@link
 *       Verdict#RETRY}, as before dead-letter topics existed. User code's I/O failures are mostly a
 *       client's lost connection ({@code NoHttpResponseException} is no {@code java.net} class); a
 *       handler that parses the record's bytes itself marks its parse error with the predicate.
 *   <li>With a dead-letter topic, a deserializer or serializer failure whose chain says the bytes
 *       are bad: an {@link IOException} (a JSON or protobuf parse error, {@code EOFException}), or
 *       a root cause that is Kafka's {@link SerializationException} (the serializer's own verdict),
 *       an {@link IllegalArgumentException} or a {@link BufferUnderflowException}: {@link
 *       Verdict#DEAD_LETTER}. Any other cause (a schema registry that answered HTTP 500 or 401: its
 *       client's own exception) is unknown.
 *   <li>Anything else: {@link Verdict#STOP}, as without a dead-letter topic. In particular a SQL
 *       data error (class 22 or 23) is not taken as the record's fault: a migration that added a
 *       constraint, a parent row in a partition not yet applied, or a writer outside nolock cause
 *       it for good records too.
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
   * @param deadLetterTopic whether a dead-letter topic is configured
   * @param deadLetterWhen the user's poison predicate
   * @throws IllegalStateException when the predicate throws: caused by {@code failure}, with the
   *     predicate's exception suppressed, so that neither hides the other (the runner stops)
   */
  public static Verdict classify(
      Throwable failure,
      RecordFailedException.Stage stage,
      boolean deadLetterTopic,
      Predicate<? super Throwable> deadLetterWhen) {
    if (Thread.currentThread().isInterrupted()
        || any(failure, RecordFailures::stops)
        || SqlErrors.classify(outermostState(failure)) == SqlErrors.Kind.SCHEMA) {
      return Verdict.STOP;
    }
    if (!deadLetterTopic && stage != RecordFailedException.Stage.HANDLER) {
      return Verdict.STOP;
    }
    if (any(failure, RecordFailures::transientFailure)) {
      return Verdict.RETRY;
    }
    if (deadLetterTopic && marked(failure, stage, deadLetterWhen)) {
      return Verdict.DEAD_LETTER;
    }
    if (isCode(stage)) {
      return any(failure, t -> t instanceof IOException) ? Verdict.RETRY : Verdict.STOP;
    }
    return badBytes(failure) ? Verdict.DEAD_LETTER : Verdict.STOP;
  }

  /**
   * Whether a deserializer's or serializer's {@code failure} is dead-lettered by the fixed rules
   * with a dead-letter topic (for the stop message, which suggests the topic only when it would
   * take the record). False for the handler and the transform: only the user's predicate
   * dead-letters their failures.
   */
  public static boolean badBytes(Throwable failure, RecordFailedException.Stage stage) {
    return !isCode(stage) && classify(failure, stage, true, t -> false) == Verdict.DEAD_LETTER;
  }

  private static boolean isCode(RecordFailedException.Stage stage) {
    return stage == RecordFailedException.Stage.HANDLER
        || stage == RecordFailedException.Stage.TRANSFORM;
  }

  private static boolean marked(
      Throwable failure, RecordFailedException.Stage stage, Predicate<? super Throwable> when) {
    try {
      return when.test(failure);
    } catch (RuntimeException e) {
      IllegalStateException thrown =
          new IllegalStateException(
              "deadLetterWhen threw "
                  + e.getClass().getName()
                  + " while classifying a "
                  + stage.header()
                  + " failure (the cause; the predicate's exception is suppressed). The runner"
                  + " stops: make the predicate total, e.g. return false for exceptions it does"
                  + " not know.",
              failure);
      thrown.addSuppressed(e);
      throw thrown;
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

  /** Rule 6: the chain says the bytes themselves are bad (network failures were rule 3). */
  private static boolean badBytes(Throwable failure) {
    if (any(failure, t -> t instanceof IOException)) {
      return true;
    }
    List<Throwable> chain = chain(failure);
    Throwable root = chain.get(chain.size() - 1);
    return root instanceof SerializationException
        || root instanceof IllegalArgumentException
        || root instanceof BufferUnderflowException;
  }

  /** The outermost SQLState in the chain, as {@link SqlErrors#classify(Throwable)} reads it. */
  private static String outermostState(Throwable failure) {
    for (Throwable t : chain(failure)) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        return sql.getSQLState();
      }
    }
    return failure instanceof DataAccessException dae ? dae.sqlState() : null;
  }

  private static boolean any(Throwable failure, Predicate<Throwable> test) {
    return chain(failure).stream().anyMatch(test);
  }

  /** {@code failure} and its causes, each once: a cause chain can loop back on itself. */
  private static List<Throwable> chain(Throwable failure) {
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    List<Throwable> chain = new ArrayList<>();
    for (Throwable t = failure; t != null && seen.add(t); t = t.getCause()) {
      chain.add(t);
    }
    return chain;
  }
}
