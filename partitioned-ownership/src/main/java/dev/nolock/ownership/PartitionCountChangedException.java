package dev.nolock.ownership;

import dev.nolock.patterns.CoordinationException;

/**
 * The topic's partition count is not the one this design was set up with, so keys now hash to other
 * partitions than before: per-key order and the single writer per key no longer hold.
 *
 * <p>The caller's action: <b>stop, and migrate</b>. Do not just restart: every runner refuses the
 * topic until the recorded count matches again. Either delete the new partitions' topic and
 * recreate it with the old count, or drain the topic (let every owner apply everything), move the
 * producers to a new topic with the new count, and start a new consumer group on it (its ownership
 * rows start fresh).
 */
public class PartitionCountChangedException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  private final String topic;
  private final int recorded;
  private final int actual;

  public PartitionCountChangedException(String topic, int recorded, int actual) {
    super(
        "Topic '"
            + topic
            + "' has "
            + actual
            + " partitions, but this design was set up with "
            + recorded
            + ": keys now hash to other partitions, so per-key order and the single writer per key"
            + " are gone. Stop the producers and runners; drain the topic and move to a new topic"
            + " and consumer group with the new count (see the module README, Caveats).");
    this.topic = topic;
    this.recorded = recorded;
    this.actual = actual;
  }

  /** The topic whose partition count changed. */
  public String topic() {
    return topic;
  }

  /** The partition count recorded when the design was set up. */
  public int recordedPartitions() {
    return recorded;
  }

  /** The partition count the topic has now. */
  public int actualPartitions() {
    return actual;
  }
}
