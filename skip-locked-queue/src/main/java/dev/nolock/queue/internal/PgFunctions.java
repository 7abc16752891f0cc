package dev.nolock.queue.internal;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import org.jooq.Field;
import org.jooq.impl.SQLDataType;

/**
 * The PostgreSQL built-ins the queue calls beyond the clock (which is {@link
 * dev.nolock.patterns.sql.PgClock}'s), as typed jOOQ fields. Every caller value is a bind
 * parameter.
 */
public final class PgFunctions {

  private PgFunctions() {}

  /** {@code pg_notify(:channel, :payload)}; both bound. */
  public static Field<Object> pgNotify(String channel, String payload) {
    return function(unquotedName("pg_notify"), SQLDataType.OTHER, val(channel), val(payload));
  }
}
