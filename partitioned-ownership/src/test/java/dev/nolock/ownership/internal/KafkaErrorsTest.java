package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.junit.jupiter.api.Test;

class KafkaErrorsTest {

  @Test
  void aFenceIsRecognisedEvenWhenWrapped() {
    assertThat(KafkaErrors.isFenced(new ProducerFencedException("newer"))).isTrue();
    assertThat(KafkaErrors.isFenced(new KafkaException(new ProducerFencedException("newer"))))
        .isTrue();
    assertThat(KafkaErrors.isFenced(new InvalidProducerEpochException("epoch"))).isFalse();
  }

  @Test
  void anInvalidProducerEpochIsOnlyPossiblyAFence() {
    assertThat(
            KafkaErrors.isPossiblyFenced(
                new KafkaException("commit failed", new InvalidProducerEpochException("epoch"))))
        .isTrue();
    assertThat(KafkaErrors.isPossiblyFenced(new TimeoutException("slow"))).isFalse();
  }

  @Test
  void authorizationFailuresAreFatal() {
    assertThat(KafkaErrors.isFatal(new TopicAuthorizationException("no"))).isTrue();
    assertThat(KafkaErrors.isFatal(new TimeoutException("slow"))).isFalse();
  }

  @Test
  void aSendRefusedForWhatWasSentIsPermanentATimeoutIsNot() {
    for (KafkaException refused :
        new KafkaException[] {
          new RecordTooLargeException("too large"),
          new RecordBatchTooLargeException("batch too large"),
          new InvalidTopicException("bad topic"),
          new InvalidRecordException("bad record"),
          new InvalidTimestampException("timestamp out of range")
        }) {
      assertThat(KafkaErrors.isPermanent(new KafkaException(refused))).as("%s", refused).isTrue();
    }
    assertThat(KafkaErrors.isPermanent(new TimeoutException("slow"))).isFalse();
    assertThat(KafkaErrors.isPermanent(new KafkaException("an abortable error"))).isFalse();
  }
}
