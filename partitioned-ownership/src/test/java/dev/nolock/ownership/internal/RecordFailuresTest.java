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
import java.io.IOException;
import java.net.ConnectException;
import java.nio.ByteBuffer;
import java.sql.SQLException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.record.TimestampType;
import org.junit.jupiter.api.Test;

class RecordFailuresTest {

  private static final Predicate<Throwable> NONE = t -> false;

  /** Like Jackson's JsonProcessingException: an IOException that means bad data. */
  static final class ParseFailure extends IOException {
    private static final long serialVersionUID = 1L;

    ParseFailure() {
      super("Unexpected character");
    }
  }

  static final class Poison extends RuntimeException {
    private static final long serialVersionUID = 1L;
  }

  /** Like Apache HttpClient's NoHttpResponseException: a lost connection outside java.net. */
  static final class NoHttpResponse extends IOException {
    private static final long serialVersionUID = 1L;

    NoHttpResponse() {
      super("The target server failed to respond");
    }
  }

  /** Like a schema registry client's exception for an HTTP 500 answer: a checked non-I/O one. */
  static final class RegistryAnswered extends Exception {
    private static final long serialVersionUID = 1L;

    RegistryAnswered(int status) {
      super("Internal Server Error; error code: " + status);
    }
  }

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
    return RecordFailures.classify(failure, stage, dlt, NONE);
  }

  @Test
  void aParseFailureInADeserializerIsDeadLetteredWithATopicAndStopsWithout() {
    Throwable failure = deserializer(new RuntimeException(new ParseFailure()));
    assertThat(of(failure, VALUE_DESERIALIZER, true)).isEqualTo(DEAD_LETTER);
    assertThat(of(failure, VALUE_DESERIALIZER, false)).isEqualTo(STOP);
  }

  @Test
  void kafkasOwnVerdictOnTheBytesIsDeadLettered() {
    // IntegerDeserializer: "Size of data received by IntegerDeserializer is not 4", no cause.
    assertThat(of(deserializer(new SerializationException("size")), VALUE_DESERIALIZER, true))
        .isEqualTo(DEAD_LETTER);
    // UUIDDeserializer: SerializationException("Error parsing data into UUID", IAE).
    Throwable uuid =
        deserializer(new SerializationException("uuid", new IllegalArgumentException("bad")));
    assertThat(of(uuid, VALUE_DESERIALIZER, true)).isEqualTo(DEAD_LETTER);
    assertThat(of(new SerializationException("cannot write"), SERIALIZER, true))
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void aDeserializerFailureOfUnknownCauseStopsEvenWithATopic() {
    // A schema registry answering HTTP 500, 429 or 401 says nothing about the record's bytes.
    Throwable failure =
        deserializer(
            new SerializationException("Error retrieving schema", new RegistryAnswered(500)));
    assertThat(of(failure, VALUE_DESERIALIZER, true)).isEqualTo(STOP);
    assertThat(RecordFailures.badBytes(failure, VALUE_DESERIALIZER)).isFalse();
    assertThat(
            RecordFailures.classify(
                failure,
                VALUE_DESERIALIZER,
                true,
                t ->
                    t.getCause() instanceof SerializationException s
                        && s.getCause() instanceof RegistryAnswered))
        .as("the user may still mark it")
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void anIoFailureInTheHandlerIsRetriedAsBeforeDeadLetterTopicsExisted() {
    assertThat(of(new NoHttpResponse(), HANDLER, false)).isEqualTo(RETRY);
    assertThat(of(new RuntimeException(new NoHttpResponse()), HANDLER, true)).isEqualTo(RETRY);
    assertThat(of(new ParseFailure(), TRANSFORM, true)).isEqualTo(RETRY);
    assertThat(of(new NoHttpResponse(), VALUE_DESERIALIZER, true))
        .as("in a deserializer an IOException that is no network failure is bad bytes")
        .isEqualTo(DEAD_LETTER);
  }

  @Test
  void aParseFailureInTheHandlerIsDeadLetteredOnlyWhenMarked() {
    Predicate<Throwable> parse = t -> t instanceof ParseFailure;
    assertThat(RecordFailures.classify(new ParseFailure(), HANDLER, true, parse))
        .isEqualTo(DEAD_LETTER);
    assertThat(RecordFailures.classify(new NoHttpResponse(), HANDLER, true, parse))
        .isEqualTo(RETRY);
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
            RecordFailures.classify(
                new SQLException("bad", "22P02"),
                HANDLER,
                true,
                t -> t instanceof SQLException e && "22P02".equals(e.getSQLState())))
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
    assertThat(RecordFailures.classify(new Poison(), HANDLER, true, poison)).isEqualTo(DEAD_LETTER);
    assertThat(RecordFailures.classify(new Poison(), HANDLER, false, poison)).isEqualTo(STOP);
    Predicate<Throwable> everything = t -> true;
    assertThat(
            RecordFailures.classify(
                new BackendUnavailableException("down", null), HANDLER, true, everything))
        .isEqualTo(RETRY);
    assertThat(
            RecordFailures.classify(
                new SQLException("no table", "42P01"), HANDLER, true, everything))
        .isEqualTo(STOP);
    assertThat(RecordFailures.classify(new AssertionError(), HANDLER, true, everything))
        .isEqualTo(STOP);
  }

  @Test
  void thePredicateIsCalledOnceAndOnlyWithATopic() {
    AtomicInteger calls = new AtomicInteger();
    Predicate<Throwable> counting =
        t -> {
          calls.incrementAndGet();
          return false;
        };
    RecordFailures.classify(new IllegalStateException("bug"), HANDLER, true, counting);
    assertThat(calls).hasValue(1);
    RecordFailures.classify(new IllegalStateException("bug"), HANDLER, false, counting);
    assertThat(calls).as("without a topic nothing is dead-lettered: not asked").hasValue(1);
  }

  @Test
  void aPredicateThatThrowsDoesNotHideTheRecordsFailure() {
    IllegalStateException handlers = new IllegalStateException("the handler's");
    NullPointerException predicates = new NullPointerException("the predicate's");
    assertThatThrownBy(
            () ->
                RecordFailures.classify(
                    handlers,
                    HANDLER,
                    true,
                    t -> {
                      throw predicates;
                    }))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("deadLetterWhen threw java.lang.NullPointerException")
        .hasCause(handlers)
        .satisfies(e -> assertThat(e.getSuppressed()).containsExactly(predicates));
  }

  @Test
  void aCauseChainThatLoopsIsReadOnce() {
    RuntimeException a = new RuntimeException("a");
    RuntimeException b = new RuntimeException("b", a);
    a.initCause(b);
    assertThat(of(a, HANDLER, true)).isEqualTo(STOP);
    assertThat(of(deserializer(a), VALUE_DESERIALIZER, true)).isEqualTo(STOP);
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
