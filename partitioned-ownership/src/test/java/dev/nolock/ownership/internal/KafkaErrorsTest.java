package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.ProducerFencedException;
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
}
