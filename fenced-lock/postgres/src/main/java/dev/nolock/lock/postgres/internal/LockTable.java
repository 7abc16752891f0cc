package dev.nolock.lock.postgres.internal;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.LeasedRow;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.patterns.sql.RenderedStatement;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Map;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record;
import org.jooq.Record1;
import org.jooq.Record2;
import org.jooq.ResultQuery;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
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

  private final Name waitersName;
  private final Table<?> waiters;
  private final Field<String> waiter;
  private final Field<OffsetDateTime> joinedAt;
  private final Field<OffsetDateTime> patientUntil;

  // What every lock cycle sends, built and rendered once (RenderedStatement); the typed DSL below
  // builds their shapes.
  private final RenderedStatement tryAcquire;
  private final RenderedStatement renew;
  private final RenderedStatement release;
  private final RenderedStatement releaseWithoutQueue;

  /**
   * The lease table {@code tableName} and its queue of waiters {@code waitersName}, both validated
   * identifiers.
   */
  public LockTable(Name tableName, Name waitersName) {
    this.table = table(tableName);
    this.waitersName = waitersName;
    this.waiters = table(waitersName);
    this.waiter =
        field(name("waiter"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.joinedAt = field(name("joined_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
    this.patientUntil =
        field(name("patient_until"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
    this.leased = LeasedRow.of(tableName, "expires_at", "token");
    this.name = field(name("name"), SQLDataType.VARCHAR(Lease.MAX_NAME_LENGTH).nullable(false));
    this.owner = field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
    this.token = field(name("token"), SQLDataType.BIGINT.nullable(false));
    this.expiresAt = field(name("expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
    // The settings of the context the statements run on (DSL.using(dataSource, POSTGRES), jOOQ's
    // defaults): a setting given to that context must be given here too, or the text would not
    // follow it.
    DSLContext render = DSL.using(SQLDialect.POSTGRES);
    this.tryAcquire =
        RenderedStatement.of(render, builtTryAcquire(render, "n", "o", Duration.ofSeconds(1)));
    this.renew =
        RenderedStatement.of(render, builtRenew(render, "n", "o", 1, Duration.ofSeconds(1)));
    this.release = RenderedStatement.of(render, builtRelease(render, "n", "o", 1, "c"));
    this.releaseWithoutQueue =
        RenderedStatement.of(render, builtReleaseWithoutQueue(render, "n", "o", 1));
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

  public Name waitersName() {
    return waitersName;
  }

  /**
   * {@code CREATE TABLE IF NOT EXISTS w (name varchar(255), waiter varchar(255), joined_at
   * timestamptz not null, patient_until timestamptz not null, expires_at timestamptz not null,
   * primary key (name, waiter))}: one row per waiting call, its place in the queue of {@code name}:
   * when it joined, until when it lets newer callers go ahead of it, until when the place is kept.
   */
  public Query createWaitersTableIfMissing(DSLContext dsl) {
    return dsl.createTableIfNotExists(waiters)
        .column(name)
        .column(waiter)
        .column(joinedAt)
        .column(patientUntil)
        .column(expiresAt)
        .primaryKey(name, waiter);
  }

  /**
   * The fair acquire, one statement of {@code WITH} parts.
   *
   * <p>The parts are one statement on one snapshot; {@code granted} runs first because the final
   * {@code SELECT} and the two later parts read it, and PostgreSQL 15 runs a data-modifying part
   * when it is first read (the order of the other two is not defined, and they touch different
   * rows).
   *
   * <ol>
   *   <li>{@code me}: the waiter's unexpired place, if any.
   *   <li>{@code turn}: true when no other unexpired place of {@code name} ahead of it (joined
   *       earlier, ties by waiter id) is out of patience (its {@code patient_until}, its own
   *       joining time plus its own patience, has passed); a caller with no place counts as the
   *       last.
   *   <li>{@code granted}: on its turn, the same upsert as {@link #tryAcquire} (a grant only when
   *       the lease ran out, the token bumped under the row lock), as {@code INSERT ... SELECT}.
   *   <li>{@code queued}: when not granted, keep the place for {@code place} more (a new place at
   *       the back, patient for {@code patience}, when it had none or it expired). A new place
   *       joins at the clock, but behind every place of the name: after a step back of the
   *       database's clock a newcomer must not count as earlier than the waiters before it.
   *   <li>{@code served}: when granted, delete the place, and the expired places of {@code name}
   *       with it (waiters that gave up without leaving).
   * </ol>
   *
   * One row (the new token) when granted, none otherwise. Row locks are taken in one order, the
   * lease row before any place, so two of these never deadlock.
   */
  public ResultQuery<Record> tryAcquireInTurn(
      DSLContext dsl,
      String lockName,
      String lockOwner,
      Duration ttl,
      String waiterId,
      Duration place,
      Duration patience) {
    return dsl.resultQuery(
        """
        WITH me AS (
          SELECT joined_at FROM {0}
          WHERE name = {2} AND waiter = {4} AND expires_at > clock_timestamp()
        ), turn AS (
          SELECT NOT EXISTS (
            SELECT 1 FROM {0} o LEFT JOIN me ON true
            WHERE o.name = {2} AND o.waiter <> {4} AND o.expires_at > clock_timestamp()
              AND (me.joined_at IS NULL OR (o.joined_at, o.waiter) < (me.joined_at, {4}))
              AND o.patient_until <= clock_timestamp()
          ) AS mine
        ), granted AS (
          INSERT INTO {1} AS l (name, owner, token, expires_at)
          SELECT {2}, {3}, 1, {5} FROM turn WHERE turn.mine
          ON CONFLICT (name) DO UPDATE
            SET owner = excluded.owner, token = l.token + 1, expires_at = excluded.expires_at
            WHERE l.expires_at <= clock_timestamp()
          RETURNING l.token
        ), queued AS (
          INSERT INTO {0} AS q (name, waiter, joined_at, patient_until, expires_at)
          SELECT {2}, {4},
            GREATEST(clock_timestamp(),
              (SELECT max(o.joined_at) + interval '1 microsecond' FROM {0} o WHERE o.name = {2})),
            {7}, {6}
          WHERE NOT EXISTS (SELECT 1 FROM granted)
          ON CONFLICT (name, waiter) DO UPDATE
            SET joined_at = CASE WHEN q.expires_at > clock_timestamp() THEN q.joined_at
                                 ELSE excluded.joined_at END,
                patient_until = CASE WHEN q.expires_at > clock_timestamp() THEN q.patient_until
                                     ELSE excluded.patient_until END,
                expires_at = excluded.expires_at
        ), served AS (
          DELETE FROM {0}
          WHERE name = {2} AND (waiter = {4} OR expires_at <= clock_timestamp())
            AND EXISTS (SELECT 1 FROM granted)
        )
        SELECT token FROM granted\
        """,
        waiters,
        table,
        val(lockName, name),
        val(lockOwner, owner),
        val(waiterId, waiter),
        PgClock.plus(ttl),
        PgClock.plus(place),
        PgClock.plus(patience));
  }

  /**
   * {@code WITH d AS (DELETE FROM w WHERE name = :name AND waiter = :waiter RETURNING 1) SELECT
   * (SELECT pg_notify(:channel, waiter) FROM <the first other unexpired place>) FROM d}: gives up
   * the place and, when there was one, wakes the waiter now first in the queue (the notification
   * goes out when the transaction commits).
   */
  public ResultQuery<Record> leave(
      DSLContext dsl, String lockName, String waiterId, String channel) {
    return dsl.resultQuery(
        """
        WITH d AS (DELETE FROM {0} WHERE name = {1} AND waiter = {2} RETURNING 1)
        SELECT ({3}) FROM d\
        """,
        waiters,
        val(lockName, name),
        val(waiterId, waiter),
        notifyFirst(lockName, waiterId, channel));
  }

  /**
   * {@code SELECT pg_notify(:channel, waiter) FROM w WHERE name = :name AND waiter <> :except AND
   * expires_at > clock_timestamp() ORDER BY joined_at, waiter LIMIT 1}: wakes the waiter first in
   * the queue, if any. The payload is the waiter's identity alone, unique per waiting call: every
   * process keys its waiters by it, however it spells the table.
   */
  private Field<Object> notifyFirst(String lockName, String except, String channel) {
    return field(
        DSL.sql(
            """
            SELECT pg_notify({0}, f.waiter) FROM {1} f
            WHERE f.name = {2} AND f.waiter <> {3} AND f.expires_at > clock_timestamp()
            ORDER BY f.joined_at, f.waiter LIMIT 1\
            """,
            val(channel), waiters, val(lockName, name), val(except, waiter)));
  }

  /**
   * {@code INSERT INTO t AS l (name, owner, token, expires_at) VALUES (:name, :owner, 1,
   * clock_timestamp() + :ttl) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token =
   * l.token + 1, expires_at = excluded.expires_at WHERE l.expires_at <= clock_timestamp() RETURNING
   * token}: one row (the new token) when granted, none when the lease is held.
   */
  public ResultQuery<Record> tryAcquire(
      DSLContext on, String lockName, String lockOwner, Duration ttl) {
    return tryAcquire.fetch(on, lockName, lockOwner, LeasedRow.leaseMillis(ttl));
  }

  /** {@link #tryAcquire} built for each call: its shape, and what tests compare it with. */
  ResultQuery<Record1<Long>> builtTryAcquire(
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
      DSLContext on, String lockName, String lockOwner, long lockToken, Duration ttl) {
    return renew.query(on, LeasedRow.leaseMillis(ttl), lockName, lockOwner, lockToken);
  }

  /** {@link #renew} built for each call. */
  Query builtRenew(
      DSLContext dsl, String lockName, String lockOwner, long lockToken, Duration ttl) {
    return leased.extend(dsl, mine(lockName, lockOwner, lockToken), ttl, Map.of());
  }

  /**
   * {@code WITH r AS (UPDATE t SET expires_at = clock_timestamp() WHERE name = :name AND owner =
   * :owner AND token = :token AND expires_at > clock_timestamp() RETURNING 1) SELECT (SELECT
   * pg_notify(:channel, waiter) FROM <the first unexpired place>) FROM r}: the row and its token
   * stay; one row back when this call freed the lease, and then, if anyone waits for it, the first
   * waiter is told when the transaction commits.
   *
   * <p>Why only when someone waits, and only the first: a {@code NOTIFY} serialises the commits of
   * every notifying transaction in the database (notifying on every release cost a quarter of the
   * lock cycles of four threads on many names), and each waiter woken sends a statement, of which
   * only the first waiter's can be granted. A waiter whose place committed after this statement
   * read the queue is not told; it joined a moment ago, so its backoff is still at its shortest and
   * it asks again within milliseconds.
   */
  public ResultQuery<Record> release(
      DSLContext on, String lockName, String lockOwner, long lockToken, String channel) {
    return release.fetch(on, lockName, lockOwner, lockToken, channel, lockName, "");
  }

  /** {@link #release} built for each call. */
  ResultQuery<Record> builtRelease(
      DSLContext dsl, String lockName, String lockOwner, long lockToken, String channel) {
    // Only an unexpired lease: releasing one that already ran out would report a release that
    // did not happen.
    return dsl.resultQuery(
        """
        WITH r AS ({0} RETURNING 1)
        SELECT ({1}) FROM r\
        """,
        leased.finish(dsl, mine(lockName, lockOwner, lockToken).and(leased.unexpired()), Map.of()),
        notifyFirst(lockName, "", channel));
  }

  /**
   * {@code UPDATE t SET expires_at = clock_timestamp() WHERE name = :name AND owner = :owner AND
   * token = :token AND expires_at > clock_timestamp()}: the release without telling any waiter, for
   * a database without the queue's table.
   */
  public Query releaseWithoutQueue(
      DSLContext on, String lockName, String lockOwner, long lockToken) {
    return releaseWithoutQueue.query(on, lockName, lockOwner, lockToken);
  }

  /** {@link #releaseWithoutQueue} built for each call. */
  Query builtReleaseWithoutQueue(
      DSLContext dsl, String lockName, String lockOwner, long lockToken) {
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
