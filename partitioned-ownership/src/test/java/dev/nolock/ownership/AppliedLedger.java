package dev.nolock.ownership;

import java.util.Map;
import java.util.TreeMap;
import org.jooq.DSLContext;
import org.jooq.Record;

/**
 * One row per committed apply, written by the handler in the apply transaction, with <b>no unique
 * key</b> on (partition, offset): a record applied twice shows as two rows and a record skipped as
 * none. The ownership table cannot show either: its {@code last_applied_offset} only moves forward,
 * so a skipped record leaves it exactly where applying every record would.
 *
 * <p>Offsets are judged as contiguous from 0, which holds for the tests' producers (idempotent, not
 * transactional: no control records, no aborted records).
 */
final class AppliedLedger {

  private static final String TABLE = "applied_ledger";

  private final DSLContext dsl;

  private AppliedLedger(DSLContext dsl) {
    this.dsl = dsl;
  }

  /** Drops and creates the ledger: each test starts with an empty one. */
  static AppliedLedger fresh(DSLContext dsl) {
    dsl.execute("DROP TABLE IF EXISTS " + TABLE);
    dsl.execute(
        "CREATE TABLE "
            + TABLE
            + " (id bigserial PRIMARY KEY, kafka_partition int NOT NULL,"
            + " kafka_offset bigint NOT NULL, epoch bigint NOT NULL)");
    return new AppliedLedger(dsl);
  }

  /** A handler that records the apply in the ledger, in the apply transaction. */
  <K, V> RecordHandler<K, V> handler() {
    return (record, tx, epoch) ->
        tx.execute(
            "INSERT INTO " + TABLE + " (kafka_partition, kafka_offset, epoch) VALUES (?, ?, ?)",
            record.partition(),
            record.offset(),
            epoch.value());
  }

  /** How many times each offset of {@code partition} was applied, for the offsets in the ledger. */
  Map<Long, Integer> appliesPerOffset(int partition) {
    Map<Long, Integer> counts = new TreeMap<>();
    for (Record r :
        dsl.fetch(
            "SELECT kafka_offset, count(*) FROM "
                + TABLE
                + " WHERE kafka_partition = ? GROUP BY kafka_offset",
            partition)) {
      counts.put(r.get(0, Long.class), r.get(1, Integer.class));
    }
    return counts;
  }

  /**
   * The offsets of {@code partition} below {@code end} not applied exactly once, with their count
   * of applies (0: skipped, 2 or more: applied again), and any offset at or above {@code end} that
   * was applied at all. Empty when each of the first {@code end} records applied once.
   */
  Map<Long, Integer> notAppliedOnce(int partition, long end) {
    Map<Long, Integer> counts = appliesPerOffset(partition);
    Map<Long, Integer> wrong = new TreeMap<>();
    for (long offset = 0; offset < end; offset++) {
      int applies = counts.getOrDefault(offset, 0);
      if (applies != 1) {
        wrong.put(offset, applies);
      }
    }
    counts.forEach(
        (offset, applies) -> {
          if (offset >= end) {
            wrong.put(offset, applies);
          }
        });
    return wrong;
  }

  /** Applies recorded for {@code partition}, whatever their offsets. */
  long applies(int partition) {
    return dsl.fetchOne("SELECT count(*) FROM " + TABLE + " WHERE kafka_partition = ?", partition)
        .get(0, Long.class);
  }
}
