package dev.nolock.ownership.internal;

import java.time.Duration;
import java.util.Set;

/**
 * What the runner tells an observer, and the places a test may steer it. Production code uses
 * {@link #NONE}; the public API does not expose this.
 */
public interface OwnerEvents {

  OwnerEvents NONE = new OwnerEvents() {};

  /**
   * A partition was claimed with {@code epoch}; its last applied offset was {@code lastApplied}.
   */
  default void claimed(int partition, long epoch, long lastApplied) {}

  /** A partition is no longer owned here: revoked, lost, or fenced by a newer epoch. */
  default void released(int partition, String why) {}

  /**
   * Called after the point-of-no-return check and right before the apply transaction starts. A test
   * blocks here to pin where a pause lands.
   */
  default void beforeApply(int partition, long offset, long epoch) {}

  /**
   * Called right before the runner asks Kafka where the logs of {@code partitions} start. A test
   * throws a {@link org.apache.kafka.common.KafkaException} here to stand for a failed lookup (a
   * partition without a leader).
   */
  default void beforeLogStartLookup(Set<Integer> partitions) {}

  /** What failed and started a backoff. */
  enum BackoffCause {
    /** A claim in the rebalance callback, inside a poll. */
    CLAIM_IN_REBALANCE,
    /** A claim retried after a poll (a failed claim, or a fenced partition still assigned). */
    CLAIM_RETRY,
    /** An apply transaction whose outcome is unknown. */
    APPLY,
    /**
     * A send to the dead-letter topic that failed or timed out with a retriable error, or that had
     * no time left before the point of no return.
     */
    DEAD_LETTER
  }

  /**
   * A backend failed {@code failuresInARow} times in a row, the last time in {@code cause}; the
   * runner polls without applying for {@code delay}. A test on a manual clock advances it here
   * instead of waiting.
   */
  default void backingOff(int failuresInARow, Duration delay, BackoffCause cause) {}

  /** The apply transaction ended with {@code outcome}. */
  default void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {}

  /**
   * Where to start reading a freshly claimed partition; the design's answer is the offset after the
   * last applied one. A test that wants a replay answers earlier.
   */
  default long startOffset(int partition, long lastApplied) {
    return lastApplied + 1;
  }
}
