package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.MockProducer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

/**
 * A dead-letter send the broker does not acknowledge is waited for only as long as the runner's
 * deadline allows, and then reported as not handled (retriable), never as sent.
 */
class DeadLettersWaitTest {

  private final ConsumerRecord<byte[], byte[]> raw =
      new ConsumerRecord<>("in", 0, 7L, new byte[] {1}, new byte[] {2});
  private final RecordFailedException failed =
      new RecordFailedException(
          RecordFailedException.Stage.HANDLER, "failed", new IllegalArgumentException(), true);

  @Test
  void aSendNotAcknowledgedWithinTheWaitIsNotHandled() {
    MockProducer<byte[], byte[]> neverAcknowledges =
        new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    DeadLetters deadLetters = new DeadLetters(neverAcknowledges, "dlt");

    assertThatThrownBy(() -> deadLetters.send(raw, failed, () -> Duration.ofMillis(50)))
        .isInstanceOfSatisfying(
            DeadLetters.SendFailedException.class,
            e -> {
              assertThat(e.retriable()).as("tried again after a backoff").isTrue();
              assertThat(e).hasMessageContaining("in-0@7").hasMessageContaining("not acknowledged");
            });
    assertThat(neverAcknowledges.history()).as("the send was made, its outcome unknown").hasSize(1);
  }

  @Test
  void aSendThatReturnsPastTheDeadlineIsNotHandledEvenIfAcknowledged() {
    MockProducer<byte[], byte[]> acknowledgesAtOnce =
        new MockProducer<>(true, null, new ByteArraySerializer(), new ByteArraySerializer());
    DeadLetters deadLetters = new DeadLetters(acknowledgesAtOnce, "dlt");

    // send() blocked (max.block.ms) until the batch's point of no return had passed.
    assertThatThrownBy(() -> deadLetters.send(raw, failed, () -> Duration.ZERO))
        .as("past the point of no return the offset must not be recorded")
        .isInstanceOfSatisfying(
            DeadLetters.SendFailedException.class,
            e -> assertThat(e.retriable()).as("tried again after a backoff").isTrue());
  }

  @Test
  void closingEndsTheWaitForAnAcknowledgement() {
    MockProducer<byte[], byte[]> neverAcknowledges =
        new MockProducer<>(false, null, new ByteArraySerializer(), new ByteArraySerializer());
    DeadLetters deadLetters = new DeadLetters(neverAcknowledges, "dlt");

    CompletableFuture<Void> sending =
        CompletableFuture.runAsync(() -> deadLetters.send(raw, failed, () -> Duration.ofHours(1)));
    Awaitility.await("the send was made").until(() -> neverAcknowledges.history().size() == 1);
    deadLetters.stopWaiting();

    Awaitility.await("the wait ended, not an hour later").until(sending::isDone);
    assertThatThrownBy(sending::join)
        .hasCauseInstanceOf(DeadLetters.SendFailedException.class)
        .satisfies(
            e -> {
              DeadLetters.SendFailedException cause =
                  (DeadLetters.SendFailedException) e.getCause();
              assertThat(cause.retriable()).as("never taken as handled").isTrue();
              assertThat(cause).hasMessageContaining("closing");
            });
  }
}
