package dev.nolock.lock.postgres.internal;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.LeasedRow;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Map;
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

  private final Table<?> table;
  private final LeasedRow leased;
  private final Field<String> name;
  private final Field<String> owner;
  private final Field<Long> token;
  private final Field<OffsetDateTime> expiresAt;

  public LockTable(Name tableName) {
    this.table = table(tableName);
    this.leased = LeasedRow.of(tableName, "expires_at", "token");
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.expiresAt = field(name("expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
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
    return leased
        .claim(ttl)
        .key(name, lockName)
        .holder(owner, val(lockOwner, owner))
        .build(dsl)
        .returningResult(token);
  }

  /**
   * {@code UPDATE t SET expires_at = clock_timestamp() + :ttl WHERE name = :name AND owner = :owner
   * AND token = :token AND expires_at > clock_timestamp()}.
   */
  public Query renew(
      DSLContext dsl, String lockName, String lockOwner, long lockToken, Duration ttl) {
    return leased.extend(dsl, mine(lockName, lockOwner, lockToken), ttl, Map.of());
  }

  /**
   * {@code UPDATE t SET expires_at = clock_timestamp() WHERE name = :name AND owner = :owner AND
   * token = :token AND expires_at > clock_timestamp()}: the row and its token stay.
   */
  public Query release(DSLContext dsl, String lockName, String lockOwner, long lockToken) {
    // Only an unexpired lease: releasing one that already ran out would report a release that
    // did not happen.
    return leased.finish(
        dsl, mine(lockName, lockOwner, lockToken).and(leased.unexpired()), Map.of());
  }

  /**
   * {@code SELECT owner, token FROM t WHERE name = :name AND expires_at > clock_timestamp()}: the
   * unexpired lease, if any.
   */
  public ResultQuery<Record2<String, Long>> holder(DSLContext dsl, String lockName) {
    return dsl.select(owner, token).from(table).where(name.eq(lockName).and(leased.unexpired()));
  }

  private Condition mine(String lockName, String lockOwner, long lockToken) {
    return name.eq(lockName).and(owner.eq(lockOwner)).and(token.eq(lockToken));
  }

  @Override
  public String toString() {
    return table.toString();
  }
}
