package dev.nolock.ownership.internal;

import static org.jooq.impl.DSL.count;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.greatest;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.ownership.LogStartMismatchException;
import dev.nolock.ownership.PartitionCountChangedException;
import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.patterns.sql.CreateIfMissing;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.patterns.sql.TableShape;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertValuesStep7;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.Select;
import org.jooq.Table;
import org.jooq.conf.ParamType;
import org.jooq.impl.SQLDataType;

/**
 * The ownership table: one row per (consumer group, topic, partition) with the owner epoch (the
 * fencing token), the last claimer, the last applied offset and the partition count the design was
 * set up with. Rows are never deleted: a deleted row would restart its epoch below the one a zombie
 * may still hold.
 */
public final class OwnerTable {

  static final Field<String> GROUP = field(name("consumer_group"), SQLDataType.VARCHAR);
  static final Field<String> TOPIC = field(name("topic"), SQLDataType.VARCHAR);
  static final Field<Integer> PARTITION = field(name("partition"), SQLDataType.INTEGER);
  static final Field<Integer> PARTITION_COUNT = field(name("partition_count"), SQLDataType.INTEGER);
  static final Field<Long> EPOCH = field(name("epoch"), SQLDataType.BIGINT);
  static final Field<String> OWNER = field(name("owner"), SQLDataType.VARCHAR);
  static final Field<Long> LAST_APPLIED = field(name("last_applied_offset"), SQLDataType.BIGINT);
  static final Field<OffsetDateTime> CLAIMED_AT =
      field(name("claimed_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);

  /** The unique key of a row, for messages. */
  static final String KEY = "(consumer_group, topic, partition)";

  private final Name tableName;
  private final Table<Record> table;

  public OwnerTable(Name tableName) {
    this.tableName = Objects.requireNonNull(tableName, "tableName");
    this.table = table(tableName);
  }

  /** A claim: the new epoch and where the partition's applied records end. */
  public record Claim(long epoch, long lastApplied) {}

  /** The row as it is now, for telling a zombie from a replay. */
  public record Row(long epoch, String owner, long lastApplied) {}

  /**
   * Bounds the current transaction on the server: every statement ({@code statement_timeout}), and
   * the idle time between statements ({@code idle_in_transaction_session_timeout}, so an owner
   * paused inside a transaction cannot hold its ownership row's lock for ever). Zero switches a
   * bound off. One round trip: {@code set_config(..., true)} with bound values, which lasts until
   * the transaction ends ({@code SET LOCAL} takes no bind values).
   */
  public void limitTransaction(DSLContext tx, Duration statementTimeout, Duration idleTimeout) {
    limitQuery(tx, statementTimeout, idleTimeout).fetch();
  }

  /** The statement of {@link #limitTransaction}, not executed. */
  public Select<?> limitQuery(DSLContext tx, Duration statementTimeout, Duration idleTimeout) {
    return tx.select(
        setLocal("statement_timeout", statementTimeout),
        setLocal("idle_in_transaction_session_timeout", idleTimeout));
  }

  /**
   * What the runner needs of an existing table ({@link TableShape}): the columns of {@link
   * #createQuery} with types that hold their values ({@code epoch} a {@code bigint}: the fencing
   * token must not wrap; {@code claimed_at} a {@code timestamptz}), {@code owner} and {@code
   * claimed_at} nullable ({@link #register} leaves them {@code NULL}), and the primary key on
   * exactly {@code (consumer_group, topic, partition)}: without it {@link #register} would add the
   * rows again at every start and a claim would match several.
   */
  private static final List<Field<?>> SHAPE =
      List.of(
          field(name("consumer_group"), SQLDataType.VARCHAR(255).nullable(false)),
          field(name("topic"), SQLDataType.VARCHAR(249).nullable(false)),
          field(name("partition"), SQLDataType.INTEGER.nullable(false)),
          field(name("partition_count"), SQLDataType.INTEGER.nullable(false)),
          field(name("epoch"), SQLDataType.BIGINT.nullable(false)),
          field(name("owner"), SQLDataType.VARCHAR(255).nullable(true)),
          field(name("last_applied_offset"), SQLDataType.BIGINT.nullable(false)),
          field(name("claimed_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true)));

  /**
   * {@link #createTableIfMissing(DSLContext, String, Duration)}, naming the table in the exception
   * as it is rendered.
   */
  public void createTableIfMissing(DSLContext dsl, Duration timeout) {
    createTableIfMissing(dsl, tableName.unquotedName().toString(), timeout);
  }

  /**
   * Creates the table unless it exists ({@code CREATE TABLE IF NOT EXISTS}, as the README's Schema
   * section shows it), then checks that the table the name resolves to has the shape the runner
   * needs (see {@link #SHAPE}); each statement bounded by {@code timeout}. A table of another shape
   * is left as it is. Runners that start at once may all call it: one that loses the race to create
   * the table ({@link CreateIfMissing}) finds the winner's and checks it the same way.
   *
   * @param configured the table as configured, for the exception
   * @throws SchemaMismatchException when the existing table cannot be used; its message holds the
   *     DDL that fits
   */
  public void createTableIfMissing(DSLContext dsl, String configured, Duration timeout) {
    Query create = createQuery(dsl).queryTimeout(seconds(timeout));
    CreateIfMissing.relation(
        dsl, tableName, timeout, on -> createQuery(on).queryTimeout(seconds(timeout)).execute());
    TableShape.of(tableName)
        .columns(SHAPE)
        .uniqueKey(SHAPE.get(0), SHAPE.get(1), SHAPE.get(2))
        .require(dsl, timeout, configured, List.of(create.getSQL(ParamType.INLINED)));
  }

  private Query createQuery(DSLContext dsl) {
    return dsl.query(
        "CREATE TABLE IF NOT EXISTS {0} ("
            + " consumer_group      varchar(255) NOT NULL,"
            + " topic               varchar(249) NOT NULL,"
            + " partition           int          NOT NULL CHECK (partition >= 0),"
            + " partition_count     int          NOT NULL CHECK (partition_count > partition),"
            + " epoch               bigint       NOT NULL CHECK (epoch >= 0),"
            + " owner               varchar(255),"
            + " last_applied_offset bigint       NOT NULL CHECK (last_applied_offset >= -1),"
            + " claimed_at          timestamptz,"
            + " PRIMARY KEY (consumer_group, topic, partition))",
        table);
  }

  /** A JDBC query timeout: {@code timeout} rounded up to whole seconds, at least one. */
  private static int seconds(Duration timeout) {
    return (int) Math.max(1, (timeout.toMillis() + 999) / 1000);
  }

  /**
   * {@link #register(DSLContext, String, String, int, Duration, Map)} with every log start at 0:
   * every missing row says -1.
   */
  public void register(
      DSLContext dsl, String group, String topic, int partitions, Duration timeout) {
    Map<Integer, Long> atZero = new HashMap<>();
    for (int p = 0; p < partitions; p++) {
      atZero.put(p, 0L);
    }
    register(dsl, group, topic, partitions, timeout, atZero);
  }

  /**
   * Records the topic's partition count for the group, or checks it against the one recorded:
   * creates the missing rows (epoch 0) of the partitions in {@code logStarts}, in one transaction,
   * each at the offset before its log start (so records deleted before the first claim stop that
   * claim). A partition not in {@code logStarts} gets no row here: a row is only ever recorded with
   * a known log start, so {@code -1} always means "start at offset 0". Resent after a lost answer,
   * it inserts nothing twice.
   *
   * @throws PartitionCountChangedException when rows for another count exist
   */
  public void register(
      DSLContext dsl,
      String group,
      String topic,
      int partitions,
      Duration timeout,
      Map<Integer, Long> logStarts) {
    dsl.transaction(
        cfg -> {
          DSLContext tx = cfg.dsl();
          limitTransaction(tx, timeout, timeout);
          for (Record2<Integer, Integer> recorded :
              tx.select(PARTITION_COUNT, count())
                  .from(table)
                  .where(GROUP.eq(group), TOPIC.eq(topic))
                  .groupBy(PARTITION_COUNT)
                  .fetch()) {
            if (recorded.value1() != partitions) {
              throw new PartitionCountChangedException(topic, recorded.value1(), partitions);
            }
          }
          InsertValuesStep7<Record, String, String, Integer, Integer, Long, Long, String> insert =
              tx.insertInto(
                  table, GROUP, TOPIC, PARTITION, PARTITION_COUNT, EPOCH, LAST_APPLIED, OWNER);
          if (logStarts.isEmpty()) {
            return;
          }
          for (Map.Entry<Integer, Long> start : new TreeMap<>(logStarts).entrySet()) {
            insert =
                insert.values(
                    group, topic, start.getKey(), partitions, 0L, start.getValue() - 1, null);
          }
          // The target names the key: on a table without it (made by hand, createTableIfMissing
          // skipped) the insert fails (42P10) instead of adding the rows again at every start.
          insert.onConflict(GROUP, TOPIC, PARTITION).doNothing().execute();
        });
  }

  /**
   * Claims a partition: bumps its epoch and names this owner, in its own transaction. The row lock
   * makes the claim wait for an apply transaction in flight; once the claim commits, every apply
   * that still carries the old epoch is refused.
   *
   * <p>A row that says nothing applied ({@code -1}) needs the partition's log start, looked up in
   * Kafka before the transaction (see {@link #lastApplied}), so that the row lock is never held
   * while Kafka is asked:
   *
   * <p>Rows are recorded only with a known log start ({@link #register}), so {@code -1} means
   * "start at offset 0" at every claim, the first included: if the log starts above 0, records were
   * deleted before they were applied (or the row was set to -1 by hand), and the claim throws
   * {@link LogStartMismatchException} and rolls back instead of starting at the log start it finds
   * and skipping them. A log start looked up a moment before is at most lower than the real one (it
   * only grows): a stop missed then fails the fetch instead ({@code OffsetOutOfRangeException}).
   *
   * @param logStart the partition's first offset in Kafka, or null when it was not looked up
   *     because the row did not say {@code -1} a moment before
   * @throws LogStartMismatchException when the row says {@code -1} and the log starts above 0
   * @throws LogStartNeededException when the row says {@code -1} and {@code logStart} is null (it
   *     was set to -1 since it was read): rolled back, claim again
   * @throws PartitionCountChangedException when the row was set up for another partition count
   * @throws IllegalStateException when the row is missing (rows must never be deleted)
   */
  public Claim claim(
      DSLContext dsl,
      String group,
      String topic,
      int partition,
      int partitions,
      String owner,
      Duration timeout,
      Long logStart) {
    return dsl.transactionResult(
        cfg -> {
          DSLContext tx = cfg.dsl();
          limitTransaction(tx, timeout, timeout);
          Record2<Long, Long> claimed =
              tx.update(table)
                  .set(EPOCH, EPOCH.plus(1L))
                  .set(OWNER, owner)
                  .set(CLAIMED_AT, PgClock.now())
                  .where(
                      GROUP.eq(group),
                      TOPIC.eq(topic),
                      PARTITION.eq(partition),
                      PARTITION_COUNT.eq(partitions))
                  .returningResult(EPOCH, LAST_APPLIED)
                  .fetchOne();
          if (claimed != null) {
            long epoch = claimed.value1();
            long lastApplied = claimed.value2();
            if (lastApplied == -1 && logStart == null) {
              throw new LogStartNeededException();
            }
            if (lastApplied == -1 && logStart > 0) {
              throw new LogStartMismatchException(
                  tableName.toString(), group, topic, partition, logStart);
            }
            return new Claim(epoch, lastApplied);
          }
          Integer recorded =
              tx.select(PARTITION_COUNT)
                  .from(table)
                  .where(GROUP.eq(group), TOPIC.eq(topic), PARTITION.eq(partition))
                  .fetchOne(PARTITION_COUNT);
          if (recorded != null) {
            throw new PartitionCountChangedException(topic, recorded, partitions);
          }
          throw new IllegalStateException(
              "The ownership row of "
                  + topic
                  + "-"
                  + partition
                  + " for group '"
                  + group
                  + "' is missing from "
                  + tableName
                  + ". Rows must never be deleted (the epoch would restart below a"
                  + " zombie's); restart the runner to recreate it only if no owner can still be"
                  + " running with an old epoch.");
        });
  }

  /** The claim found {@code -1} but was given no log start: roll back, look it up, claim again. */
  public static final class LogStartNeededException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    LogStartNeededException() {
      super("The ownership row says nothing applied; its log start must be looked up first");
    }
  }

  /**
   * The last applied offset of each of {@code partitions}, read without a lock, so a claim knows
   * which rows say {@code -1} and need a log start; a partition without a row is left out.
   */
  public Map<Integer, Long> lastApplied(
      DSLContext dsl,
      String group,
      String topic,
      Collection<Integer> partitions,
      Duration timeout) {
    // One statement in autocommit: no transaction to bound, no COMMIT whose answer could be lost.
    Map<Integer, Long> rows = new HashMap<>();
    for (Record2<Integer, Long> r :
        dsl.select(PARTITION, LAST_APPLIED)
            .from(table)
            .where(GROUP.eq(group), TOPIC.eq(topic), PARTITION.in(partitions))
            .queryTimeout(seconds(timeout))
            .fetch()) {
      rows.put(r.value1(), r.value2());
    }
    return rows;
  }

  /**
   * The first statement of an apply transaction: advances the partition's last applied offset to
   * {@code offset}, only if the row still carries {@code epoch} and {@code owner} and the offset
   * moves forward. Holds the row lock until the transaction ends, so a claim waits for it.
   *
   * <p>The same statement bounds the rest of the transaction (see {@link #limitTransaction}) with
   * {@code set_config(..., true)}, which lasts until the transaction ends, saving a round trip per
   * apply. It runs on the matched row; a refused apply does not need the bounds.
   *
   * @return 1 when the apply may go ahead, 0 when it is refused (see {@link #row})
   */
  public int advance(
      DSLContext tx,
      String group,
      String topic,
      int partition,
      long offset,
      long epoch,
      String owner,
      Safeguards safeguards,
      Duration statementTimeout,
      Duration idleTimeout) {
    return advanceQuery(
            tx,
            group,
            topic,
            partition,
            offset,
            epoch,
            owner,
            safeguards,
            statementTimeout,
            idleTimeout)
        .execute();
  }

  /** The statement of {@link #advance}, not executed. */
  public Query advanceQuery(
      DSLContext tx,
      String group,
      String topic,
      int partition,
      long offset,
      long epoch,
      String owner,
      Safeguards safeguards,
      Duration statementTimeout,
      Duration idleTimeout) {
    Condition where = GROUP.eq(group).and(TOPIC.eq(topic)).and(PARTITION.eq(partition));
    if (safeguards.epochCheck()) {
      where = where.and(EPOCH.eq(epoch)).and(OWNER.eq(owner));
    }
    if (safeguards.offsetCheck()) {
      where = where.and(LAST_APPLIED.lt(offset));
    }
    where =
        where
            .and(setLocal("statement_timeout", statementTimeout).isNotNull())
            .and(setLocal("idle_in_transaction_session_timeout", idleTimeout).isNotNull());
    return tx.update(table)
        .set(
            LAST_APPLIED,
            safeguards.offsetCheck() ? val(offset) : greatest(LAST_APPLIED, val(offset)))
        .where(where);
  }

  /**
   * Moves the partition's row past offsets the consumer passed without a record for the handler:
   * transaction markers and, under {@code read_committed}, aborted records (and offsets removed by
   * compaction). Without it the row would stay before them, and once retention deleted them, the
   * next claim would seek below the log start.
   *
   * <p>One autocommit statement: it sets the row to {@code to} only if it still carries {@code
   * epoch} and {@code owner} (so a newer claim is never overwritten) and says between {@code from}
   * and {@code to} (so it never moves back). Resent after its answer was lost, it matches the row
   * it already moved and sets the same value.
   *
   * @param from the offset before the first one the caller has not applied
   * @param to the offset before the consumer's position; every offset in between held no record for
   *     the handler
   * @return 1 when the row now says {@code to}, 0 when the epoch or owner changed (or the row moved
   *     outside the range)
   */
  public int skipTo(
      DSLContext dsl,
      String group,
      String topic,
      int partition,
      long epoch,
      String owner,
      long from,
      long to,
      Duration timeout) {
    return dsl.update(table)
        .set(LAST_APPLIED, to)
        .where(
            GROUP.eq(group),
            TOPIC.eq(topic),
            PARTITION.eq(partition),
            EPOCH.eq(epoch),
            OWNER.eq(owner),
            LAST_APPLIED.between(from, to))
        .queryTimeout(seconds(timeout))
        .execute();
  }

  private static Field<String> setLocal(String setting, Duration value) {
    return function(
        "set_config",
        SQLDataType.VARCHAR,
        inline(setting),
        val(Long.toString(value.toMillis())),
        inline(true));
  }

  /** The partition's row as this transaction sees it. */
  public Row row(DSLContext tx, String group, String topic, int partition) {
    Record3<Long, String, Long> row =
        tx.select(EPOCH, OWNER, LAST_APPLIED)
            .from(table)
            .where(GROUP.eq(group), TOPIC.eq(topic), PARTITION.eq(partition))
            .fetchOne();
    if (row == null) {
      throw new IllegalStateException(
          "The ownership row of " + topic + "-" + partition + " vanished from " + tableName);
    }
    return new Row(row.value1(), row.value2(), row.value3());
  }

  @Override
  public String toString() {
    return "OwnerTable[" + tableName + "]";
  }
}
