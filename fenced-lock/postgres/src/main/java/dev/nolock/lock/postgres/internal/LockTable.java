package dev.nolock.lock.postgres.internal;

import static dev.nolock.lock.postgres.internal.PgFunctions.clockTimestamp;
import static dev.nolock.lock.postgres.internal.PgFunctions.clockTimestampPlus;
import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.Lease;
import java.time.Duration;
import java.time.OffsetDateTime;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.ResultQuery;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;

/**
 * The lease table and the four statements on it, built with jOOQ's typed DSL. The table name is an
 * already validated identifier; every value is bound.
 */
public final class LockTable {

  private static final String ALIAS = "l";

  private final Table<?> table;
  private final Table<?> aliased;
  private final Field<String> name;
  private final Field<String> owner;
  private final Field<Long> token;
  private final Field<OffsetDateTime> expiresAt;
  private final Field<Long> aliasedToken;
  private final Field<OffsetDateTime> aliasedExpiresAt;

  public LockTable(Name tableName) {
    this.table = table(tableName);
    this.aliased = table.as(ALIAS);
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.expiresAt = field(name("expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
    this.aliasedToken = field(name(ALIAS, "token"), SQLDataType.BIGINT);
    this.aliasedExpiresAt = field(name(ALIAS, "expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
  }

  /**
   * {@code CREATE TABLE IF NOT EXISTS t (name varchar(255) primary key, owner varchar(255) not
   * null, token bigint not null check (token > 0), expires_at timestamptz not null)}.
   */
  public Query createTableIfMissing(DSLContext dsl) {
    return dsl.createTableIfNotExists(table)
        .column(name)
        .column(owner)
        .column(token)
        .column(expiresAt)
        .primaryKey(name)
        .check(token.gt(inline(0L)));
  }

  /**
   * {@code INSERT INTO t AS l (name, owner, token, expires_at) VALUES (:name, :owner, 1,
   * clock_timestamp() + :ttl) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token =
   * l.token + 1, expires_at = excluded.expires_at WHERE l.expires_at <= clock_timestamp() RETURNING
   * token}: one row (the new token) when granted, none when the lease is held.
   */
  public ResultQuery<Record1<Long>> tryAcquire(
      DSLContext dsl, String lockName, String lockOwner, Duration ttl) {
    return dsl.insertInto(aliased, name, owner, token, expiresAt)
        .values(val(lockName, name), val(lockOwner, owner), inline(1L), clockTimestampPlus(ttl))
        .onConflict(name)
        .doUpdate()
        .set(owner, excluded(owner))
        .set(token, aliasedToken.plus(inline(1L)))
        .set(expiresAt, excluded(expiresAt))
        .where(aliasedExpiresAt.le(clockTimestamp()))
        .returningResult(token);
  }

  /**
   * {@code UPDATE t SET expires_at = clock_timestamp() + :ttl WHERE name = :name AND owner = :owner
   * AND token = :token AND expires_at > clock_timestamp()}.
   */
  public Query renew(
      DSLContext dsl, String lockName, String lockOwner, long lockToken, Duration ttl) {
    return dsl.update(table)
        .set(expiresAt, clockTimestampPlus(ttl))
        .where(held(lockName, lockOwner, lockToken));
  }

  /**
   * {@code UPDATE t SET expires_at = clock_timestamp() WHERE name = :name AND owner = :owner AND
   * token = :token AND expires_at > clock_timestamp()}: the row and its token stay.
   */
  public Query release(DSLContext dsl, String lockName, String lockOwner, long lockToken) {
    return dsl.update(table)
        .set(expiresAt, clockTimestamp())
        .where(held(lockName, lockOwner, lockToken));
  }

  /**
   * {@code SELECT owner, token FROM t WHERE name = :name AND expires_at > clock_timestamp()}: the
   * unexpired lease, if any.
   */
  public ResultQuery<Record2<String, Long>> holder(DSLContext dsl, String lockName) {
    return dsl.select(owner, token)
        .from(table)
        .where(name.eq(lockName).and(expiresAt.gt(clockTimestamp())));
  }

  private Condition held(String lockName, String lockOwner, long lockToken) {
    return name.eq(lockName)
        .and(owner.eq(lockOwner))
        .and(token.eq(lockToken))
        .and(expiresAt.gt(clockTimestamp()));
  }

  @Override
  public String toString() {
    return table.toString();
  }
}
