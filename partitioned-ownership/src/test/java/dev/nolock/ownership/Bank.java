package dev.nolock.ownership;

import dev.nolock.patterns.FencingToken;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jooq.DSLContext;
import org.jooq.Record;

/**
 * The state the tests' commands change: a counter per key, and a ledger with one row per apply. The
 * ledger has <b>no unique key</b> on (key, seq), so an apply that commits twice shows as a second
 * row, and its {@code id} order is the order applies were made.
 *
 * <p>Each command's value is its per-key sequence number, starting at 1; the handler records
 * whether the counter it just incremented equals that number, i.e. whether the command came in
 * order, with nothing lost or doubled before it.
 */
final class Bank {

  private Bank() {}

  /** Drops and creates the tables: each test starts with an empty bank. */
  static void freshTables(DSLContext dsl) {
    dsl.execute("DROP TABLE IF EXISTS bank_counters, bank_ledger");
    dsl.execute(
        "CREATE TABLE bank_counters ("
            + " key text PRIMARY KEY, applied bigint NOT NULL, last_seq int NOT NULL)");
    dsl.execute(
        "CREATE TABLE bank_ledger ("
            + " id bigserial PRIMARY KEY, key text NOT NULL, seq int NOT NULL,"
            + " kafka_partition int NOT NULL, kafka_offset bigint NOT NULL,"
            + " epoch bigint NOT NULL, owner text NOT NULL, in_order boolean NOT NULL)");
  }

  /** The handler every owner in the tests runs. */
  static RecordHandler<String, String> handler(String owner) {
    return (ConsumerRecord<String, String> record, DSLContext tx, FencingToken epoch) -> {
      int seq = Integer.parseInt(record.value());
      long applied =
          tx.fetchOne(
                  "INSERT INTO bank_counters AS c (key, applied, last_seq) VALUES (?, 1, ?)"
                      + " ON CONFLICT (key) DO UPDATE"
                      + " SET applied = c.applied + 1, last_seq = excluded.last_seq"
                      + " RETURNING applied",
                  record.key(),
                  seq)
              .get(0, Long.class);
      tx.execute(
          "INSERT INTO bank_ledger (key, seq, kafka_partition, kafka_offset, epoch, owner,"
              + " in_order) VALUES (?, ?, ?, ?, ?, ?, ?)",
          record.key(),
          seq,
          record.partition(),
          record.offset(),
          epoch.value(),
          owner,
          applied == seq);
    };
  }

  /** What the tables say after a run, judged against the commands sent. */
  record Report(
      long ledgerRows,
      long counterTotal,
      Map<String, Long> wrongCounters,
      List<String> duplicates,
      List<String> outOfOrder,
      long notInOrderFlags) {

    boolean clean() {
      return wrongCounters.isEmpty()
          && duplicates.isEmpty()
          && outOfOrder.isEmpty()
          && notInOrderFlags == 0;
    }

    @Override
    public String toString() {
      return "ledger rows "
          + ledgerRows
          + ", counter total "
          + counterTotal
          + ", keys with a wrong counter "
          + wrongCounters.size()
          + " "
          + first(wrongCounters.toString())
          + ", duplicated (key,seq) "
          + duplicates.size()
          + " "
          + first(duplicates.toString())
          + ", keys out of order "
          + outOfOrder.size()
          + " "
          + first(outOfOrder.toString())
          + ", applies flagged out of order "
          + notInOrderFlags;
    }

    private static String first(String s) {
      return s.length() > 300 ? s.substring(0, 300) + "...]" : s;
    }
  }

  /**
   * @param sent commands sent per key (each key's sequence numbers are 1..n)
   */
  static Report report(DSLContext dsl, Map<String, Integer> sent) {
    Map<String, Long> counters = new HashMap<>();
    for (Record r : dsl.fetch("SELECT key, applied FROM bank_counters")) {
      counters.put(r.get(0, String.class), r.get(1, Long.class));
    }
    Map<String, Long> wrong = new TreeMap<>();
    long total = 0;
    for (Map.Entry<String, Integer> e : sent.entrySet()) {
      long applied = counters.getOrDefault(e.getKey(), 0L);
      total += applied;
      if (applied != e.getValue()) {
        wrong.put(e.getKey(), applied - e.getValue());
      }
    }
    for (String key : counters.keySet()) {
      if (!sent.containsKey(key)) {
        wrong.put(key, counters.get(key));
      }
    }
    Map<String, List<Integer>> perKey = new LinkedHashMap<>();
    long rows = 0;
    for (Record r : dsl.fetch("SELECT key, seq FROM bank_ledger ORDER BY id")) {
      perKey
          .computeIfAbsent(r.get(0, String.class), k -> new ArrayList<>())
          .add(r.get(1, Integer.class));
      rows++;
    }
    List<String> duplicates = new ArrayList<>();
    List<String> outOfOrder = new ArrayList<>();
    for (Map.Entry<String, List<Integer>> e : perKey.entrySet()) {
      List<Integer> seqs = e.getValue();
      Map<Integer, Integer> seen = new HashMap<>();
      for (int seq : seqs) {
        if (seen.merge(seq, 1, Integer::sum) == 2) {
          duplicates.add(e.getKey() + "#" + seq);
        }
      }
      for (int i = 1; i < seqs.size(); i++) {
        if (seqs.get(i) <= seqs.get(i - 1)) {
          outOfOrder.add(e.getKey() + ": " + seqs.get(i - 1) + " then " + seqs.get(i));
          break;
        }
      }
    }
    long flagged =
        dsl.fetchOne("SELECT count(*) FROM bank_ledger WHERE NOT in_order").get(0, Long.class);
    return new Report(rows, total, wrong, duplicates, outOfOrder, flagged);
  }
}
