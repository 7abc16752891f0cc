package dev.nolock.ownership;

import dev.nolock.patterns.CoordinationException;

/**
 * A partition's ownership row says nothing was applied ({@code last_applied_offset = -1}, which
 * means "start at offset 0") at a claim, but the partition's log no longer starts at 0. Either
 * records were deleted (retention, {@code deleteRecords}) before they were applied; or the
 * partition held only transaction markers and aborted records (which {@code read_committed} passes
 * without an apply) and its runner stopped before it recorded passing them (it does so at the
 * commit interval and at close), and retention deleted them; or the row was set to -1 by a
 * migration or by hand to mean "from the start". The runner cannot tell these apart, so it stops
 * rather than skip records; the claim that found it rolled back.
 *
 * <p>The caller's action: if records were lost, restore them or accept the loss; to start at the
 * log's first record (which also reprocesses from the start), set the row to the offset before it,
 * while no runner of the group runs, with the statement in the message.
 */
public class LogStartMismatchException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  private final String topic;
  private final int partition;
  private final long logStart;

  public LogStartMismatchException(
      String table, String group, String topic, int partition, long logStart) {
    super(
        "The ownership row of "
            + topic
            + "-"
            + partition
            + " (group '"
            + group
            + "') says nothing was applied (last_applied_offset = -1: start at offset 0), but"
            + " the partition's log starts at offset "
            + logStart
            + ". Records 0 to "
            + (logStart - 1)
            + " were deleted before they were applied; or they held only transaction markers and"
            + " aborted records (passed without an apply) and the runner stopped before recording"
            + " that; or the row was set to -1 by a migration or by hand. If records were lost,"
            + " restore them or accept the loss; to apply from the"
            + " log's first record, run, while no runner of the group runs: UPDATE "
            + table
            + " SET last_applied_offset = "
            + (logStart - 1)
            + " WHERE consumer_group = '"
            + group
            + "' AND topic = '"
            + topic
            + "' AND partition = "
            + partition
            + " AND last_applied_offset = -1;");
    this.topic = topic;
    this.partition = partition;
    this.logStart = logStart;
  }

  public String topic() {
    return topic;
  }

  public int partition() {
    return partition;
  }

  /** The partition's first offset in Kafka when the claim looked it up. */
  public long logStart() {
    return logStart;
  }
}
