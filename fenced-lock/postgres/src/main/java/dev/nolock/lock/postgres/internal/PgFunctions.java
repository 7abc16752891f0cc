package dev.nolock.lock.postgres.internal;

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
 * The PostgreSQL built-ins this module calls, as typed jOOQ fields. Every caller value is a bind
 * parameter; only constants are inlined.
 */
public final class PgFunctions {

  private static final Field<DayToSecond> ONE_MILLISECOND =
      inline(DayToSecond.valueOf(Duration.ofMillis(1)));

  private PgFunctions() {}

  /**
   * {@code clock_timestamp()}: the database's wall clock at the moment it is evaluated. Unlike
   * {@code now()} (also {@code current_timestamp}), it is not frozen at the start of the
   * transaction.
   */
  public static Field<OffsetDateTime> clockTimestamp() {
    return function(unquotedName("clock_timestamp"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  }

  /**
   * {@code clock_timestamp() + (:millis * interval '1 millisecond')}, with {@code ttl} rounded
   * <em>up</em> to whole milliseconds and the number bound. Rounding up keeps the stored lease at
   * least as long as the one the holder measures on its own clock, never shorter.
   */
  public static Field<OffsetDateTime> clockTimestampPlus(Duration ttl) {
    return clockTimestamp().plus(val(ceilMillis(ttl)).times(ONE_MILLISECOND));
  }

  /** {@code ttl} in whole milliseconds, rounded up. */
  public static long ceilMillis(Duration ttl) {
    long millis = ttl.toMillis();
    return ttl.equals(Duration.ofMillis(millis)) ? millis : millis + 1;
  }

  /**
   * {@code pg_try_advisory_xact_lock(hashtextextended(:key, 0))}: takes the transaction-level
   * advisory lock on the 64-bit hash of {@code key} if no other transaction holds it, without
   * waiting.
   */
  public static Field<Boolean> tryAdvisoryXactLock(String key) {
    Field<Long> hash =
        function(unquotedName("hashtextextended"), SQLDataType.BIGINT, val(key), inline(0L));
    return function(unquotedName("pg_try_advisory_xact_lock"), SQLDataType.BOOLEAN, hash);
  }
}
