package dev.nolock.lock.postgres.internal;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.unquotedName;

import dev.nolock.patterns.sql.AdvisoryLockNamespace;
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
   * {@code pg_try_advisory_xact_lock(hashtextextended(:input, 0))}, the input {@code namespace}'s
   * framing of {@code key} ({@link AdvisoryLockNamespace#hashInput}): takes the transaction-level
   * advisory lock on its 64-bit hash if no other transaction holds it, without waiting.
   */
  public static Field<Boolean> tryAdvisoryXactLock(AdvisoryLockNamespace namespace, String key) {
    return function(
        unquotedName("pg_try_advisory_xact_lock"), SQLDataType.BOOLEAN, namespace.key(key));
  }
}
