package dev.nolock.ownership.internal;

import static dev.nolock.ownership.internal.RecordFailedException.Stage.HANDLER;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.SERIALIZER;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.TRANSFORM;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.VALUE_DESERIALIZER;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.DEAD_LETTER;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.RETRY;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.STOP;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlErrors;
import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.nio.ByteBuffer;
import java.nio.charset.MalformedInputException;
import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class RecordFailuresTest {

  private static final Predicate<Throwable> NONE = t -> false;

  /** Like Apache HttpClient's NoHttpResponseException: a lost connection outside java.net. */
  static final class NoHttpResponse extends IOException {
    private static final long serialVersionUID = 1L;

    NoHttpResponse() {
      super("The target server failed to respond");
    }
  }

  /** Like Jackson's UnrecognizedPropertyException: a data-binding mismatch after a deploy. */
  static final class UnrecognizedProperty extends IOException {
    private static final long serialVersionUID = 1L;

    UnrecognizedProperty() {
      super("Unrecognized field \"discount\"");
    }
  }

  /** Like a schema registry client's exception for an HTTP 500 answer: a checked non-I/O one. */
  static final class RegistryAnswered extends Exception {
    private static final long serialVersionUID = 1L;

    RegistryAnswered() {
      super("Internal Server Error; error code: 50001");
    }
  }

  static final class Poison extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  /** What the runner hands over for a deserializer failure: Kafka's wrapper around it. */
  private static RecordDeserializationException deserializer(Throwable cause) {
    return new RecordDeserializationException(
        RecordDeserializationException.DeserializationExceptionOrigin.VALUE,
        new TopicPartition("t", 0),
        0,
        0,
        TimestampType.CREATE_TIME,
        ByteBuffer.allocate(0),
        ByteBuffer.allocate(0),
        null,
        "bad",
        cause);
  }

  private static RecordFailures.Verdict of(
      Throwable failure, RecordFailedException.Stage stage, boolean dlt) {
    return classify(failure, stage, dlt, NONE);
  }

  private static RecordFailures.Verdict classify(
      Throwable failure,
      RecordFailedException.Stage stage,
      boolean dlt,
      Predicate<? super Throwable> when) {
    return RecordFailures.classify(failure, stage, "t-0@7", dlt, when);
  }

  @Test
  void noDeserializerFailureIsDeadLetteredUnlessMarked() {
    Throwable[] failures = {
      // What looks like bad bytes may be a registry's truncated answer or a stale connection: the
      // JDK's HttpClient reports one as IOException caused by EOFException.
      new SerializationException("cannot read", new EOFException("end of input")),
      new SerializationException("registry", new IOException(new EOFException("EOF reached"))),
      new SerializationException("cannot decode", new MalformedInputException(1)),
      // A schema registry answering HTTP 500, 429 or 401 says nothing about the record.
      new SerializationException("Error retrieving schema", new RegistryAnswered()),
      // A data-binding mismatch follows a deploy (producer first), not one record.
      new SerializationException("cannot bind", new UnrecognizedProperty()),
      // Confluent's "Could not find class ... specified in writer's schema": a missing class.
      new SerializationException("Could not find class com.example.Order"),
      new SerializationException("Error parsing data into UUID", new IllegalArgumentException())
    };
    for (Throwable cause : failures) {
      Throwable failure = deserializer(cause);
      assertThat(of(failure, VALUE_DESERIALIZER, true)).as("%s", cause).isEqualTo(STOP);
      assertThat(of(failure, VALUE_DESERIALIZER, false)).as("%s", cause).isEqualTo(STOP);
    }
    Throwable parse = deserializer(new SerializationException("cannot read", new EOFException()));
    assertThat(
            classify(
                parse,
                VALUE_DESERIALIZER,
                true,
                t ->
                    t.getCause() instanceof SerializationException s
                        && s.getCause() instanceof EOFException))
        .as("the user, who knows the deserializer calls no registry, marks it")
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void aSerializerFailureIsDeadLetteredOnlyWhenMarked() {
    // Its input is the transform's output: a bug as likely as a bad input record.
    Throwable failure = new SerializationException("cannot write", new EOFException());
    assertThat(of(failure, SERIALIZER, true)).isEqualTo(STOP);
    assertThat(classify(failure, SERIALIZER, true, t -> t instanceof SerializationException))
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void anIoFailureInTheHandlerIsRetriedAsBeforeDeadLetterTopicsExisted() {
    assertThat(of(new NoHttpResponse(), HANDLER, false)).isEqualTo(RETRY);
    assertThat(of(new RuntimeException(new NoHttpResponse()), HANDLER, true)).isEqualTo(RETRY);
    assertThat(SqlErrors.isTransient(new NoHttpResponse()))
        .as("the rule before dead-letter topics")
        .isTrue();
  }

  @Test
  void anIoFailureInTheTransformStopsAsWithoutATopic() {
    // Without a topic every transform failure stops; with one, an unmarked one must not be
    // retried forever instead.
    assertThat(of(new UnrecognizedProperty(), TRANSFORM, false)).isEqualTo(STOP);
    assertThat(of(new UnrecognizedProperty(), TRANSFORM, true)).isEqualTo(STOP);
    assertThat(classify(new UnrecognizedProperty(), TRANSFORM, true, t -> t instanceof IOException))
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void aParseFailureInTheHandlerIsDeadLetteredOnlyWhenMarked() {
    Predicate<Throwable> parse = t -> t instanceof EOFException;
    assertThat(classify(new EOFException(), HANDLER, true, parse)).isEqualTo(DEAD_LETTER);
    assertThat(classify(new NoHttpResponse(), HANDLER, true, parse)).isEqualTo(RETRY);
    assertThat(of(new EOFException(), HANDLER, true)).as("unmarked: retried").isEqualTo(RETRY);
  }

  @Test
  void aNetworkFailureIsRetried() {
    Throwable failure = new RuntimeException(new ConnectException("refused"));
    assertThat(of(failure, HANDLER, true)).isEqualTo(RETRY);
    assertThat(of(failure, HANDLER, false)).isEqualTo(RETRY);
    assertThat(of(deserializer(failure), VALUE_DESERIALIZER, true)).isEqualTo(RETRY);
    assertThat(of(failure, TRANSFORM, true)).isEqualTo(RETRY);
  }

  @Test
  void withoutATopicEveryDeserializerTransformAndSerializerFailureStops() {
    Throwable transientFailure = new BackendUnavailableException("down", null);
    assertThat(of(deserializer(transientFailure), VALUE_DESERIALIZER, false)).isEqualTo(STOP);
    assertThat(of(transientFailure, TRANSFORM, false)).isEqualTo(STOP);
    assertThat(of(transientFailure, SERIALIZER, false)).isEqualTo(STOP);
  }

  @Test
  void aDataErrorInTheHandlerIsNotTakenAsTheRecordsFault() {
    // A migration's NOT NULL or CHECK, a parent row in a partition not applied yet, a writer
    // outside nolock: good records fail with these too.
    for (String state : new String[] {"23502", "23514", "23503", "23505", "22P02"}) {
      assertThat(of(new SQLException("refused", state), HANDLER, true)).as(state).isEqualTo(STOP);
      assertThat(of(new RuntimeException(new SQLException("refused", state)), TRANSFORM, true))
          .as(state)
          .isEqualTo(STOP);
    }
    assertThat(
            classify(
                new SQLException("bad", "22P02"),
                HANDLER,
                true,
                t -> SqlErrors.classify(t) == SqlErrors.Kind.DATA))
        .as("unless the user marks it")
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void anUnknownHandlerFailureStopsEvenWithATopic() {
    assertThat(of(new IllegalStateException("bug"), HANDLER, true)).isEqualTo(STOP);
    assertThat(of(new IllegalStateException("bug"), TRANSFORM, true)).isEqualTo(STOP);
  }

  @Test
  void thePredicateMarksPoisonOnlyAfterStopAndRetryRules() {
    Predicate<Throwable> poison = t -> t instanceof Poison || t.getCause() instanceof Poison;
    assertThat(classify(new Poison(), HANDLER, true, poison)).isEqualTo(DEAD_LETTER);
    assertThat(classify(new Poison(), HANDLER, false, poison)).isEqualTo(STOP);
    Predicate<Throwable> everything = t -> true;
    assertThat(classify(new BackendUnavailableException("down", null), HANDLER, true, everything))
        .isEqualTo(RETRY);
    assertThat(classify(new SQLException("no table", "42P01"), HANDLER, true, everything))
        .isEqualTo(STOP);
    assertThat(classify(new AssertionError(), HANDLER, true, everything)).isEqualTo(STOP);
  }

  @Test
  void thePredicateIsCalledOnceAndOnlyWithATopic() {
    AtomicInteger calls = new AtomicInteger();
    Predicate<Throwable> counting =
        t -> {
          calls.incrementAndGet();
          return false;
        };
    classify(new IllegalStateException("bug"), HANDLER, true, counting);
    assertThat(calls).hasValue(1);
    classify(new IllegalStateException("bug"), HANDLER, false, counting);
    assertThat(calls).as("without a topic nothing is dead-lettered: not asked").hasValue(1);
  }

  @Test
  void aPredicateThatThrowsDoesNotHideTheRecordsFailure() {
    IllegalStateException handlers = new IllegalStateException("the handler's");
    NullPointerException predicates = new NullPointerException("the predicate's");
    assertThatThrownBy(
            () ->
                classify(
                    handlers,
                    HANDLER,
                    true,
                    t -> {
                      throw predicates;
                    }))
        .isInstanceOf(RecordFailures.PredicateFailedException.class)
        .hasMessageContaining("deadLetterWhen threw java.lang.NullPointerException")
        .hasMessageContaining("t-0@7")
        .hasCause(handlers)
        .satisfies(e -> assertThat(e.getSuppressed()).containsExactly(predicates));
  }

  @Test
  void aPredicateThatThrowsAnErrorIsReportedLikeAnyOther() {
    IllegalStateException handlers = new IllegalStateException("the handler's");
    assertThatThrownBy(
            () ->
                classify(
                    handlers,
                    HANDLER,
                    true,
                    t -> {
                      throw new StackOverflowError();
                    }))
        .isInstanceOf(RecordFailures.PredicateFailedException.class)
        .hasCause(handlers);
  }

  /** A chain that loops must not spin the runner's thread forever (the guard: each once). */
  @Test
  @Timeout(value = 10, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)
  void aCauseChainThatLoopsIsReadOnce() {
    RuntimeException a = new RuntimeException("a");
    RuntimeException b = new RuntimeException("b", a);
    a.initCause(b);
    assertThat(of(a, HANDLER, true)).isEqualTo(STOP);
    assertThat(of(deserializer(a), VALUE_DESERIALIZER, true)).isEqualTo(STOP);
    assertThat(SqlErrors.classify(a)).isEqualTo(SqlErrors.Kind.OTHER);
    assertThat(SqlErrors.isUniqueViolation(a)).isFalse();
    assertThat(KafkaErrors.isFatal(a)).isFalse();
  }

  @Test
  void aSchemaErrorStops() {
    assertThat(of(new SQLException("relation does not exist", "42P01"), HANDLER, true))
        .isEqualTo(STOP);
    assertThat(
            of(deserializer(new SQLException("no privilege", "42501")), VALUE_DESERIALIZER, true))
        .isEqualTo(STOP);
  }

  @Test
  void aBackendOrTransientSqlFailureIsRetried() {
    assertThat(of(new BackendUnavailableException("down", null), HANDLER, true)).isEqualTo(RETRY);
    assertThat(of(new BackendUnavailableException("down", null), HANDLER, false)).isEqualTo(RETRY);
    assertThat(of(new SQLException("serialization", "40001"), HANDLER, true)).isEqualTo(RETRY);
  }
}
