package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.Field;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/**
 * PostgreSQL's clock as typed jOOQ fields, with one rounding rule for every lease the nolock SQL
 * modules store.
 *
 * <p>Guarantee: a lease written as {@link #plus(Duration) plus(lease)} never ends earlier than the
 * caller asked: the stored end is at least {@code clock_timestamp() + lease}, to the nanosecond,
 * because the length is rounded <em>up</em> to whole milliseconds. Rounding down would store a
 * lease up to a millisecond shorter than the one the holder measures on its own clock, so the row
 * could be taken over while the holder still believes it holds it. Every caller value is a bind
 * parameter; only the unit interval is inlined.
 *
 * <p>Algorithm of {@link #plus(Duration)}:
 *
 * <ol>
 *   <li>Round the length up to whole milliseconds ({@link #ceilMillis}): 1000 ms plus one
 *       nanosecond becomes 1001 ms.
 *   <li>Bind that number and multiply it by an inlined {@code interval '1 millisecond'}.
 *   <li>Add it to {@code clock_timestamp()}, the database's clock when the expression is evaluated.
 *       Not {@code now()}: that is frozen at the start of the transaction, so a statement that
 *       waited on a row lock would judge a lease at a moment already past.
 * </ol>
 */
public final class PgClock {

  private static final Field<DayToSecond> ONE_MILLISECOND =
      inline(DayToSecond.valueOf(Duration.ofMillis(1)));

  private PgClock() {}

  /** {@code clock_timestamp()}: the database's clock when the expression is evaluated. */
  public static Field<OffsetDateTime> now() {
    return function(unquotedName("clock_timestamp"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  }

  /**
   * {@code clock_timestamp() + (:millis * interval '1 millisecond')}, {@code length} rounded up.
   *
   * @throws IllegalArgumentException when {@code length} is null or negative
   */
  public static Field<OffsetDateTime> plus(Duration length) {
    return plus(now(), length);
  }

  /**
   * {@code base + (:millis * interval '1 millisecond')}, {@code length} rounded up: the end of a
   * lease of {@code length} that starts at {@code base}.
   *
   * @throws IllegalArgumentException when {@code base} or {@code length} is null or {@code length}
   *     is negative
   */
  public static Field<OffsetDateTime> plus(Field<OffsetDateTime> base, Duration length) {
    if (base == null) {
      throw new IllegalArgumentException("The base is null: pass PgClock.now() or a timestamp.");
    }
    return base.plus(interval(length));
  }

  /**
   * {@code clock_timestamp() - (:millis * interval '1 millisecond')}, {@code age} rounded up: a
   * moment at least {@code age} ago, for "older than {@code age}".
   *
   * @throws IllegalArgumentException when {@code age} is null or negative
   */
  public static Field<OffsetDateTime> minus(Duration age) {
    // Added as a negative number of milliseconds: jOOQ's minus() with a numeric operand counts
    // days.
    return now().plus(val(-ceilMillis(age)).times(ONE_MILLISECOND));
  }

  /**
   * {@code :millis * interval '1 millisecond'} with {@code length} rounded up and bound. Typed as a
   * number because jOOQ's timestamp arithmetic takes one; PostgreSQL sees an interval.
   *
   * @throws IllegalArgumentException when {@code length} is null or negative
   */
  public static Field<Long> interval(Duration length) {
    return val(ceilMillis(length)).times(ONE_MILLISECOND);
  }

  /**
   * {@code length} in whole milliseconds, rounded up: never shorter than {@code length}.
   *
   * @throws IllegalArgumentException when {@code length} is null or negative
   */
  public static long ceilMillis(Duration length) {
    if (length == null || length.isNegative()) {
      throw new IllegalArgumentException(
          "The length is " + length + ": pass a duration of zero or more.");
    }
    long millis = length.toMillis();
    return length.equals(Duration.ofMillis(millis)) ? millis : millis + 1;
  }
}
