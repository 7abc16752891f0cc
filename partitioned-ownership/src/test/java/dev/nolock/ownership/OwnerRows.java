package dev.nolock.ownership;

import java.util.Map;
import java.util.TreeMap;
import org.jooq.DSLContext;
import org.jooq.Record;

/** The ownership table as the tests read it (default table name). */
final class OwnerRows {

  record Row(long epoch, String owner, long lastApplied) {}

  private OwnerRows() {}

  static Map<Integer, Row> read(DSLContext dsl, String group, String topic) {
    Map<Integer, Row> rows = new TreeMap<>();
    for (Record r :
        dsl.fetch(
            "SELECT partition, epoch, owner, last_applied_offset FROM "
                + OwnershipConfig.DEFAULT_TABLE
                + " WHERE consumer_group = ? AND topic = ?",
            group,
            topic)) {
      rows.put(
          r.get(0, Integer.class),
          new Row(r.get(1, Long.class), r.get(2, String.class), r.get(3, Long.class)));
    }
    return rows;
  }

  /**
   * How far the runners got: the sum over partitions of {@code last_applied_offset + 1}. A
   * position, not a count of applies: a record skipped on the way does not lower it, and a record
   * applied twice does not raise it, so wait on it, then judge what was applied with {@link
   * AppliedLedger} or {@link Bank#report} (ledgers without a unique key). Assumes contiguous
   * offsets from 0 (no transactional producer).
   */
  static long appliedThrough(DSLContext dsl, String group, String topic) {
    return read(dsl, group, topic).values().stream().mapToLong(r -> r.lastApplied() + 1).sum();
  }
}
