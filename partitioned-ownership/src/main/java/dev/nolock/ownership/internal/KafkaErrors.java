package dev.nolock.ownership.internal;

import dev.nolock.patterns.Causes;
import org.apache.kafka.common.InvalidRecordException;
import org.apache.kafka.common.errors.AuthenticationException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.InvalidProducerEpochException;
import org.apache.kafka.common.errors.InvalidTimestampException;
import org.apache.kafka.common.errors.InvalidTopicException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordBatchTooLargeException;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.UnsupportedVersionException;

/** How a transactional producer's failure is to be read. */
public final class KafkaErrors {

  private KafkaErrors() {}

  /** Another producer with the same {@code transactional.id} has taken over: stop for good. */
  public static boolean isFenced(Throwable failure) {
    return has(failure, ProducerFencedException.class);
  }

  /**
   * On Kafka 4.x (transaction version 2) a fenced producer's next send or commit fails with this,
   * not with {@link ProducerFencedException}: abort, and the abort says whether it was a fence.
   */
  public static boolean isPossiblyFenced(Throwable failure) {
    return has(failure, InvalidProducerEpochException.class);
  }

  /**
   * A send the broker refuses for what was sent (a record or batch too large, an invalid topic,
   * record or timestamp): an abort succeeds, but the same batch fails the same way again.
   */
  public static boolean isPermanent(Throwable failure) {
    return has(failure, RecordTooLargeException.class)
        || has(failure, RecordBatchTooLargeException.class)
        || has(failure, InvalidTopicException.class)
        || has(failure, InvalidRecordException.class)
        || has(failure, InvalidTimestampException.class);
  }

  /** Errors an abort and a retry will not cure. */
  public static boolean isFatal(Throwable failure) {
    return has(failure, AuthenticationException.class)
        || has(failure, AuthorizationException.class)
        || has(failure, UnsupportedVersionException.class);
  }

  private static boolean has(Throwable failure, Class<? extends Throwable> type) {
    return Causes.of(failure).stream().anyMatch(type::isInstance);
  }
}
