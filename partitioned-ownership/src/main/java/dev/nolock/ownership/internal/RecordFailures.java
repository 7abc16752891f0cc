package dev.nolock.ownership.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Causes;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.EOFException;
import java.io.IOException;
import java.io.InterruptedIOException;
import java.io.UTFDataFormatException;
import java.nio.charset.CharacterCodingException;
import java.sql.SQLException;
import java.sql.SQLRecoverableException;
import java.sql.SQLTransientException;
import java.util.List;
import java.util.Set;
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
 *       {@link Verdict#DEAD_LETTER}.
 *   <li>A handler failure with any other {@link IOException} in the chain: {@link Verdict#RETRY},
 *       as before dead-letter topics existed ({@link SqlErrors#isTransient} took every {@code
 *       IOException} as transient). User code's I/O failures are mostly a client's lost connection
 *       ({@code NoHttpResponseException} is no {@code java.net} class); a handler that parses the
 *       record's bytes itself marks its parse error with the predicate.
 *   <li>With a dead-letter topic, a deserializer failure caused by a parse error of the bytes
 *       themselves: {@link EOFException}, {@link CharacterCodingException}, {@link
 *       UTFDataFormatException}, Jackson's {@code StreamReadException} (malformed JSON: {@code
 *       JsonParseException}; Jackson 2 and 3) or protobuf's {@code InvalidProtocolBufferException}:
 *       {@link Verdict#DEAD_LETTER}. Nothing else is taken as the bytes' fault: a data-binding
 *       mismatch (an unknown property, a missing class) follows a deploy, not a record, and a
 *       schema registry's error answer (HTTP 500, 401) says nothing about the record.
 *   <li>Anything else: {@link Verdict#STOP}, as without a dead-letter topic. In particular a SQL
 *       data error (class 22 or 23) is not taken as the record's fault (a migration that added a
 *       constraint, a parent row in a partition not yet applied, or a writer outside nolock cause
 *       it for good records too), nor is a serializer's failure (its input is the transform's
 *       output).
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

  /**
   * Parse failures that libraries throw only for malformed input, matched by class name (the class
   * or a superclass) so that none of these libraries is a dependency.
   */
  private static final Set<String> PARSE_FAILURES =
      Set.of(
          "com.fasterxml.jackson.core.exc.StreamReadException",
          "com.fasterxml.jackson.core.JsonParseException",
          "tools.jackson.core.exc.StreamReadException",
          "com.google.protobuf.InvalidProtocolBufferException");

  private RecordFailures() {}

  /**
   * The verdict on {@code failure} in {@code stage}; see the class Javadoc. Calls {@code
   * deadLetterWhen} at most once, and only with a dead-letter topic.
   *
   * @param where the record, as {@code topic-partition@offset}, for the message when the predicate
   *     throws
   * @param deadLetterTopic whether a dead-letter topic is configured
   * @param deadLetterWhen the user's poison predicate
   * @throws IllegalStateException when the predicate throws: naming the record, caused by {@code
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
    if (stage == RecordFailedException.Stage.HANDLER) {
      return chain.stream().anyMatch(t -> t instanceof IOException) ? Verdict.RETRY : Verdict.STOP;
    }
    return deadLetterTopic && badBytes(failure, stage) ? Verdict.DEAD_LETTER : Verdict.STOP;
  }

  /**
   * Whether a deserializer's {@code failure} is a parse error of the record's bytes (rule 6), which
   * a dead-letter topic takes without a predicate; for the stop message, which suggests the topic
   * alone only then. False for every other stage.
   */
  public static boolean badBytes(Throwable failure, RecordFailedException.Stage stage) {
    boolean deserializer =
        stage == RecordFailedException.Stage.KEY_DESERIALIZER
            || stage == RecordFailedException.Stage.VALUE_DESERIALIZER;
    return deserializer && Causes.of(failure).stream().anyMatch(RecordFailures::parseFailure);
  }

  private static boolean parseFailure(Throwable t) {
    if (t instanceof EOFException
        || t instanceof CharacterCodingException
        || t instanceof UTFDataFormatException) {
      return true;
    }
    for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
      if (PARSE_FAILURES.contains(c.getName())) {
        return true;
      }
    }
    return false;
  }

  private static boolean marked(
      Throwable failure,
      RecordFailedException.Stage stage,
      String where,
      Predicate<? super Throwable> when) {
    try {
      return when.test(failure);
    } catch (RuntimeException e) {
      IllegalStateException thrown =
          new IllegalStateException(
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
    return chain.get(0) instanceof DataAccessException dae ? dae.sqlState() : null;
  }
}
