package dev.nolock.queue.internal;

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
 * The PostgreSQL built-ins the queue calls, as typed jOOQ fields. Every caller value is a bind
 * parameter; only constants are inlined.
 */
public final class PgFunctions {

  private static final Field<DayToSecond> ONE_MILLISECOND =
      inline(DayToSecond.valueOf(Duration.ofMillis(1)));

  private PgFunctions() {}

  /**
   * {@code clock_timestamp()}: the database's clock when evaluated, not frozen at the start of the
   * transaction like {@code now()}.
   */
  public static Field<OffsetDateTime> clockTimestamp() {
    return function(unquotedName("clock_timestamp"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  }

  /** {@code clock_timestamp() + :millis * interval '1 millisecond'}, rounded up to millis. */
  public static Field<OffsetDateTime> clockTimestampPlus(Duration duration) {
    if (duration.isZero()) {
      return clockTimestamp();
    }
    return clockTimestamp().plus(millis(duration));
  }

  /** {@code clock_timestamp() - :millis * interval '1 millisecond'}, rounded up to millis. */
  public static Field<OffsetDateTime> clockTimestampMinus(Duration duration) {
    // Added as a negative number of milliseconds: jOOQ's minus() with a numeric operand would
    // count it in days.
    return clockTimestamp().plus(val(-ceilMillis(duration)).times(ONE_MILLISECOND));
  }

  /**
   * {@code :millis * interval '1 millisecond'} with the number bound. Typed as a number because
   * jOOQ's timestamp arithmetic takes one; PostgreSQL sees an interval.
   */
  public static Field<Long> millis(Duration duration) {
    return val(ceilMillis(duration)).times(ONE_MILLISECOND);
  }

  /** {@code pg_notify(:channel, :payload)}; both bound. */
  public static Field<Object> pgNotify(String channel, String payload) {
    return function(unquotedName("pg_notify"), SQLDataType.OTHER, val(channel), val(payload));
  }

  /** {@code duration} in whole milliseconds, rounded up. */
  public static long ceilMillis(Duration duration) {
    long millis = duration.toMillis();
    return duration.equals(Duration.ofMillis(millis)) ? millis : millis + 1;
  }
}
