package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.noCondition;
import static org.jooq.impl.DSL.table;

import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.InsertOnConflictConditionStep;
import org.jooq.Name;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.UpdateConditionStep;
import org.jooq.impl.SQLDataType;

/**
 * The three statements of a row that one holder leases at a time, on PostgreSQL's clock: claim it
 * if it is free or its lease ended (bumping its attempt counter), extend it while it is still the
 * caller's and unexpired, finish it if it is still the caller's. Parameterised by the table and its
 * column names; every value is bound.
 *
 * <p>Guarantee: two holders never both get a claim of the same row for overlapping leases on the
 * database's clock, and each claim of a row carries a higher attempt counter than the one before
 * (the counter is the fencing token). An extension never revives a lease that already ran out. A
 * lease ends no earlier than the caller asked ({@link PgClock#plus}).
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>{@link #claim}: {@code INSERT INTO t AS l (keys, values, attempt, until) VALUES (..., 1,
 *       clock_timestamp() + :lease) ON CONFLICT (keys) DO UPDATE SET <taken over> = excluded.<taken
 *       over>, attempt = l.attempt + 1, until = excluded.until WHERE l.until <= clock_timestamp()
 *       AND <extra>}: the row lock serialises concurrent claims, and the second one re-checks the
 *       lease after the first commits. The caller adds {@code RETURNING}.
 *   <li>{@link #extend}: {@code UPDATE t SET until = clock_timestamp() + :lease, <more> WHERE
 *       <mine> AND until > clock_timestamp()}: a compare-and-swap on the holder's identity; a lease
 *       that ran out is not revived, so a holder that was paused past it learns it lost the row.
 *   <li>{@link #finish}: {@code UPDATE t SET until = clock_timestamp(), <more> WHERE <mine>}: the
 *       lease ends now, the row and its counter stay (a deleted row would restart the counter below
 *       a stale holder's). The caller adds {@link #unexpired()} to {@code mine} when a lease that
 *       already ran out must not count as finished.
 * </ol>
 *
 * Each statement matches one row by the table's unique key; read its count with {@link
 * SqlErrors#atMostOneRow}.
 */
public final class LeasedRow {

  private static final String DEFAULT_ALIAS = "l";

  private final Table<Record> table;
  private final String alias;
  private final Table<Record> aliased;
  private final Field<OffsetDateTime> until;
  private final Field<Long> attempt;

  private LeasedRow(
      Table<Record> table, String alias, Field<OffsetDateTime> until, Field<Long> attempt) {
    this.table = table;
    this.alias = alias;
    this.aliased = table.as(alias);
    this.until = until;
    this.attempt = attempt;
  }

  /**
   * The same table, its claim naming the existing row {@code alias} ({@code "l"} unless set).
   *
   * @throws IllegalArgumentException when {@code alias} is null or blank
   */
  public LeasedRow as(String alias) {
    if (alias == null || alias.isBlank()) {
      throw new IllegalArgumentException("The alias is blank: pass a name such as \"k\".");
    }
    return new LeasedRow(table, alias, until, attempt);
  }

  /**
   * A leased-row table.
   *
   * @param table the table's (validated, possibly schema-qualified) name
   * @param until the {@code timestamptz} column where the lease ends
   * @param attempt the integer column counting claims (the fencing token of a claim)
   * @throws IllegalArgumentException when an argument is null
   */
  public static LeasedRow of(Name table, String until, String attempt) {
    if (table == null || until == null || attempt == null) {
      throw new IllegalArgumentException(
          "Pass the table name and the names of its lease-end and attempt columns; got "
              + table
              + ", "
              + until
              + ", "
              + attempt
              + ".");
    }
    return new LeasedRow(
        table(table),
        DEFAULT_ALIAS,
        field(name(until), SQLDataType.TIMESTAMPWITHTIMEZONE),
        field(name(attempt), SQLDataType.BIGINT));
  }

  /** The column {@code column} of the row being taken over, in a claim's {@code DO UPDATE}. */
  public <T> Field<T> existing(Field<T> column) {
    return field(name(alias, column.getName()), column.getDataType());
  }

  /** {@code until > clock_timestamp()}: the lease has not run out. */
  public Condition unexpired() {
    return until.gt(PgClock.now());
  }

  /** {@code until <= clock_timestamp()}: the lease has run out (or was finished). */
  public Condition expired() {
    return until.le(PgClock.now());
  }

  /** A claim being built; {@link LeasedRow#claim} starts one. */
  public final class Claim {
    private final Duration lease;
    private final List<Field<?>> keys = new ArrayList<>();
    private final Map<Field<?>, Field<?>> inserted = new LinkedHashMap<>();
    private final Map<Field<?>, Field<?>> takeover = new LinkedHashMap<>();
    private Condition also = noCondition();

    private Claim(Duration lease) {
      this.lease = lease;
    }

    /** A column of the unique key, with its bound value: the row the claim is for. */
    public <T> Claim key(Field<T> column, T value) {
      keys.add(column);
      inserted.put(column, org.jooq.impl.DSL.val(value, column));
      return this;
    }

    /** A column that names the holder: written on insert and on takeover. */
    public <T> Claim holder(Field<T> column, Field<T> value) {
      inserted.put(column, value);
      takeover.put(column, excluded(column));
      return this;
    }

    /** A column written only when the claim inserts the row. */
    public <T> Claim onInsert(Field<T> column, Field<T> value) {
      inserted.put(column, value);
      return this;
    }

    /** A column a takeover sets to {@code value} (which may read {@link #existing} columns). */
    public <T> Claim onTakeover(Field<T> column, Field<T> value) {
      takeover.put(column, value);
      return this;
    }

    /** A further condition a takeover needs, on {@link #existing} columns. */
    public Claim onlyIf(Condition condition) {
      also = also.and(condition);
      return this;
    }

    /** The statement, without {@code RETURNING}. */
    public InsertOnConflictConditionStep<Record> build(DSLContext dsl) {
      if (keys.isEmpty()) {
        throw new IllegalArgumentException("A claim needs the row's key: call key(column, value).");
      }
      Map<Field<?>, Field<?>> values = new LinkedHashMap<>(inserted);
      values.put(attempt, inline(1L));
      values.put(until, PgClock.plus(lease));
      Map<Field<?>, Field<?>> sets = new LinkedHashMap<>(takeover);
      sets.put(attempt, existing(attempt).plus(inline(1L)));
      sets.put(until, excluded(until));
      return dsl.insertInto(aliased, values.keySet())
          .values(values.values())
          .onConflict(keys)
          .doUpdate()
          .set(sets)
          .where(existing(until).le(PgClock.now()).and(also));
    }
  }

  /**
   * Starts a claim for a lease of {@code lease}.
   *
   * @throws IllegalArgumentException when {@code lease} is null, zero or negative
   */
  public Claim claim(Duration lease) {
    requirePositive(lease);
    return new Claim(lease);
  }

  /**
   * {@code UPDATE t SET until = clock_timestamp() + :lease, <more> WHERE <mine> AND until >
   * clock_timestamp()}.
   *
   * @param mine the row's key and the holder's identity (owner, attempt or token)
   * @param more further columns to set, or an empty map
   * @throws IllegalArgumentException when {@code lease} is null, zero or negative
   */
  public UpdateConditionStep<Record> extend(
      DSLContext dsl, Condition mine, Duration lease, Map<? extends Field<?>, ?> more) {
    requirePositive(lease);
    Map<Field<?>, Object> sets = new LinkedHashMap<>(more);
    sets.put(until, PgClock.plus(lease));
    return dsl.update(table).set(sets).where(mine.and(unexpired()));
  }

  /**
   * {@code UPDATE t SET until = clock_timestamp(), <more> WHERE <mine>}.
   *
   * @param mine the row's key and the holder's identity, plus {@link #unexpired()} if a lease that
   *     already ran out must not count as finished
   * @param more further columns to set, or an empty map
   */
  public UpdateConditionStep<Record> finish(
      DSLContext dsl, Condition mine, Map<? extends Field<?>, ?> more) {
    Map<Field<?>, Object> sets = new LinkedHashMap<>(more);
    sets.put(until, PgClock.now());
    return dsl.update(table).set(sets).where(mine);
  }

  private static void requirePositive(Duration lease) {
    if (lease == null || lease.isZero() || lease.isNegative()) {
      throw new IllegalArgumentException(
          "The lease is " + lease + ": pass a positive duration (the time the row stays held).");
    }
  }

  /**
   * {@code lease} as {@link #claim} and {@link #extend} bind it (whole milliseconds, rounded up),
   * for the same statement run from its rendered text ({@link RenderedStatement}).
   *
   * @throws IllegalArgumentException when {@code lease} is null, zero or negative
   */
  public static long leaseMillis(Duration lease) {
    requirePositive(lease);
    return PgClock.ceilMillis(lease);
  }

  @Override
  public String toString() {
    return table.toString();
  }
}
