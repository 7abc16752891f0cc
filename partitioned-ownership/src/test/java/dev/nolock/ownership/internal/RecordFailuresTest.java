package dev.nolock.ownership.internal;

import static dev.nolock.ownership.internal.RecordFailedException.Stage.HANDLER;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.SERIALIZER;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.TRANSFORM;
import static dev.nolock.ownership.internal.RecordFailedException.Stage.VALUE_DESERIALIZER;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.DEAD_LETTER;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.RETRY;
import static dev.nolock.ownership.internal.RecordFailures.Verdict.STOP;
import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import java.io.IOException;
import java.net.ConnectException;
import java.nio.ByteBuffer;
import java.sql.SQLException;
import java.util.function.Predicate;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RecordDeserializationException;
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
  void aParseFailureInAHandlerIsNotRetriedForeverNorDeadLettered() {
    assertThat(of(new ParseFailure(), HANDLER, true)).isEqualTo(STOP);
    assertThat(of(new java.net.MalformedURLException("no protocol"), HANDLER, true))
        .isEqualTo(STOP);
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
  void aDataErrorInTheHandlerIsDeadLettered() {
    assertThat(of(new SQLException("duplicate key", "23505"), HANDLER, true))
        .isEqualTo(DEAD_LETTER);
    assertThat(of(new RuntimeException(new SQLException("bad", "22P02")), TRANSFORM, true))
        .isEqualTo(DEAD_LETTER);
    assertThat(of(new SQLException("duplicate key", "23505"), HANDLER, false)).isEqualTo(STOP);
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
