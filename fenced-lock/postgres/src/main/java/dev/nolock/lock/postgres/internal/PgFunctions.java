package dev.nolock.lock.postgres.internal;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import org.jooq.Field;
import org.jooq.impl.SQLDataType;

/**
 * The PostgreSQL built-ins this module calls beyond the shared clock ({@link
 * dev.nolock.patterns.sql.PgClock}), as typed jOOQ fields. Every caller value is a bind parameter;
 * only constants are inlined.
 */
public final class PgFunctions {

  private PgFunctions() {}

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
