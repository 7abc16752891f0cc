package dev.nolock.idempotency.internal;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.Field;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;

/** The PostgreSQL built-ins this module calls, as typed jOOQ fields; caller values are bound. */
public final class PgFunctions {

  private static final Field<DayToSecond> ONE_MILLISECOND =
      inline(DayToSecond.valueOf(Duration.ofMillis(1)));

  private PgFunctions() {}

  /**
   * {@code clock_timestamp()}: the database's clock when evaluated, unlike {@code now()}, which is
   * frozen at the start of the transaction (a statement that waited on a row lock would judge a
   * lease at a moment already past).
   */
  public static Field<OffsetDateTime> clockTimestamp() {
    return function(unquotedName("clock_timestamp"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  }

  /** {@code clock_timestamp() + (:millis * interval '1 millisecond')}; whole milliseconds. */
  public static Field<OffsetDateTime> clockTimestampPlus(Duration duration) {
    return clockTimestamp().plus(val(duration.toMillis()).times(ONE_MILLISECOND));
  }
}
