package dev.nolock.idempotency.internal;

import static dev.nolock.patterns.sql.PgClock.now;
import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.greatest;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.noCondition;
import static org.jooq.impl.DSL.row;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.sequence;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.Phases;
import dev.nolock.idempotency.StoredResult;
import dev.nolock.patterns.sql.CreateIfMissing;
import dev.nolock.patterns.sql.LeasedRow;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.patterns.sql.RenderedStatement;
import dev.nolock.patterns.sql.TableShape;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record3;
import org.jooq.Record4;
import org.jooq.ResultQuery;
import org.jooq.SQLDialect;
import org.jooq.Sequence;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The keys table, its attempt-token sequence and the statements on them, in jOOQ's typed DSL. The
 * table name is an already validated identifier; every value is bound, only constants are inlined.
 */
public final class KeyTable {

  public static final String IN_PROGRESS = "in_progress";
  public static final String COMPLETED = "completed";

  private static final String ALIAS = "k";

  /**
   * What a successful claim returns; {@code downstreamKey} is the row's, written by the claim that
   * inserted it and never changed by a takeover.
   */
  public record Claim(long token, int number, String recoveryPoint, UUID downstreamKey) {}

  /** An abandoned key as {@link #listAbandoned} returns it. */
  public record AbandonedRow(
      String scope,
      String principal,
      String key,
      String recoveryPoint,
      int attempts,
      Instant createdAt,
      Instant retentionEndedAt) {}

  /** A key's row as another request sees it. */
  public record KeyRow(
      String fingerprint,
      String state,
      Integer status,
      byte[] body,
      OffsetDateTime lockedUntil,
      OffsetDateTime now) {

    public boolean completed() {
      return COMPLETED.equals(state);
    }

    public StoredResult result() {
      return StoredResult.of(status == null ? 0 : status, body == null ? new byte[0] : body);
    }

    /** How long the lease still runs, on the database's clock; zero once it ended. */
    public Duration leaseRemaining() {
      Duration left = Duration.between(now, lockedUntil);
      return left.isNegative() ? Duration.ZERO : left;
    }
  }

  private final Name tableName;
  private final Table<?> table;
  private final Table<?> aliased;
  private final LeasedRow leased;
  private final Sequence<Long> attemptSequence;
  private final Name expiresIndex;
  private final Name inProgressIndex;
  private final TableShape shape;

  private final Field<String> scope =
      field(name("scope"), SQLDataType.VARCHAR(IdempotencyKeys.MAX_SCOPE_LENGTH).nullable(false));

  /** The caller's principal, {@code ''} for the anonymous caller (see {@code Caller}). */
  private final Field<String> principal =
      field(name("principal"), SQLDataType.CLOB.nullable(false));

  private final Field<String> key =
      field(
          name("idempotency_key"),
          SQLDataType.VARCHAR(IdempotencyKeys.MAX_KEY_LENGTH).nullable(false));
  private final Field<String> fingerprint =
      field(name("fingerprint"), SQLDataType.VARCHAR(Fingerprint.MAX_LENGTH).nullable(false));
  private final Field<String> state = field(name("state"), SQLDataType.VARCHAR(16).nullable(false));
  private final Field<Long> attemptToken =
      field(name("attempt_token"), SQLDataType.BIGINT.nullable(false));
  private final Field<Integer> attemptCount =
      field(name("attempt_count"), SQLDataType.INTEGER.nullable(false));
  private final Field<String> recoveryPoint =
      field(name("recovery_point"), SQLDataType.VARCHAR(63).nullable(false));
  private final Field<OffsetDateTime> lockedUntil =
      field(name("locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  private final Field<Integer> responseStatus =
      field(name("response_status"), SQLDataType.INTEGER.nullable(true));
  private final Field<byte[]> responseBody =
      field(name("response_body"), SQLDataType.BLOB.nullable(true));
  private final Field<OffsetDateTime> createdAt =
      field(name("created_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  private final Field<OffsetDateTime> completedAt =
      field(name("completed_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));
  private final Field<OffsetDateTime> expiresAt =
      field(name("expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  private final Field<UUID> downstreamKey =
      field(name("downstream_key"), SQLDataType.UUID.nullable(false));

  private final Field<String> aliasedFingerprint;
  private final Field<String> aliasedState;
  private final Field<OffsetDateTime> aliasedExpiresAt;
  private final Field<String> aliasedScope;
  private final Field<String> aliasedPrincipal;
  private final Field<String> aliasedKey;

  // What every call sends, built and rendered once (RenderedStatement), in both forms where a
  // safeguard can be switched off; the typed DSL in the built* methods builds their shapes.
  private final RenderedStatement claimSameRequest;
  private final RenderedStatement claimAnyRequest;
  private final RenderedStatement read;
  private final RenderedStatement completeHeld;
  private final RenderedStatement completeAny;

  /** The table {@code tableName} (validated); the sequence and indexes are named after it. */
  public KeyTable(Name tableName) {
    this.tableName = tableName;
    this.table = table(tableName);
    this.aliased = table.as(ALIAS);
    this.leased = LeasedRow.of(tableName, "locked_until", "attempt_count").as(ALIAS);
    String last = tableName.last();
    Name sequenceName =
        tableName.qualified()
            ? name(tableName.qualifier().last(), last + "_attempt_seq")
            : name(last + "_attempt_seq");
    this.attemptSequence = sequence(sequenceName, SQLDataType.BIGINT);
    // CREATE INDEX takes no schema: the index lives in its table's schema.
    this.expiresIndex = name(last + "_expires_idx");
    // Not the "_pending_idx" of the shape before callers, on (scope, idempotency_key): CREATE
    // INDEX IF NOT EXISTS would keep that one on a migrated table, and the listing's order by
    // (scope, principal, idempotency_key) could not use it.
    this.inProgressIndex = name(last + "_open_idx");
    this.aliasedFingerprint = field(name(ALIAS, "fingerprint"), SQLDataType.VARCHAR);
    this.aliasedState = field(name(ALIAS, "state"), SQLDataType.VARCHAR);
    this.aliasedExpiresAt = field(name(ALIAS, "expires_at"), SQLDataType.TIMESTAMPWITHTIMEZONE);
    this.aliasedScope = field(name(ALIAS, "scope"), SQLDataType.VARCHAR);
    this.aliasedPrincipal = field(name(ALIAS, "principal"), SQLDataType.CLOB);
    this.aliasedKey = field(name(ALIAS, "idempotency_key"), SQLDataType.VARCHAR);
    this.shape =
        TableShape.of(tableName)
            .columns(
                List.of(
                    scope,
                    principal,
                    key,
                    fingerprint,
                    state,
                    attemptToken,
                    attemptCount,
                    recoveryPoint,
                    lockedUntil,
                    responseStatus,
                    responseBody,
                    createdAt,
                    completedAt,
                    expiresAt,
                    downstreamKey))
            .uniqueKey(scope, principal, key);
    // The settings of the context the statements run on (DSL.using(dataSource, POSTGRES), jOOQ's
    // defaults): a setting given to that context must be given here too, or the text would not
    // follow it.
    DSLContext render = DSL.using(SQLDialect.POSTGRES);
    Fingerprint anyFingerprint = Fingerprint.of("f");
    Duration second = Duration.ofSeconds(1);
    UUID anyUuid = new UUID(0, 0);
    this.claimSameRequest =
        RenderedStatement.of(
            render,
            builtClaim(render, "s", "p", "k", anyFingerprint, anyUuid, second, second, true));
    this.claimAnyRequest =
        RenderedStatement.of(
            render,
            builtClaim(render, "s", "p", "k", anyFingerprint, anyUuid, second, second, false));
    this.read = RenderedStatement.of(render, builtRead(render, "s", "p", "k"));
    StoredResult anyResult = StoredResult.of(200, new byte[0]);
    this.completeHeld =
        RenderedStatement.of(
            render, builtComplete(render, "s", "p", "k", 1, anyResult, second, true));
    this.completeAny =
        RenderedStatement.of(
            render, builtComplete(render, "s", "p", "k", 1, anyResult, second, false));
  }

  /**
   * What {@code createTableIfMissing} requires of an existing table, checked in the catalog of the
   * relation the name resolves to ({@link TableShape}): every column {@link #createIfMissing}
   * creates, with a type that holds its values (the four timestamps {@code timestamptz}: a {@code
   * timestamp} without time zone is converted through each session's TimeZone, so instances in two
   * zones would read one lease or expiry hours apart), the nullable ones nullable, and the primary
   * key (or a unique key) on exactly {@code (scope, principal, idempotency_key)}, which the claim's
   * {@code ON CONFLICT} needs and which lets one request per key and caller through. A table of the
   * shape before callers (no {@code principal}, no {@code downstream_key}, the key on {@code
   * (scope, idempotency_key)}) is refused: on it every caller would share one key space.
   */
  public TableShape shape() {
    return shape;
  }

  /**
   * The sequence, the table, the expiry index and the partial index of in-progress keys (which the
   * abandoned-keys gauge and listing read), each {@code IF NOT EXISTS}, in that order.
   */
  public List<Query> createIfMissing(DSLContext dsl) {
    return List.of(
        dsl.createSequenceIfNotExists(attemptSequence).startWith(1L),
        dsl.createTableIfNotExists(table)
            .column(scope)
            .column(principal)
            .column(key)
            .column(fingerprint)
            .column(state)
            .column(attemptToken)
            .column(attemptCount)
            .column(recoveryPoint)
            .column(lockedUntil)
            .column(responseStatus)
            .column(responseBody)
            .column(createdAt)
            .column(completedAt)
            .column(expiresAt)
            .column(downstreamKey)
            .primaryKey(scope, principal, key)
            .check(state.in(inline(IN_PROGRESS), inline(COMPLETED)))
            .check(attemptToken.gt(inline(0L)))
            .check(attemptCount.gt(inline(0))),
        dsl.createIndexIfNotExists(expiresIndex).on(table, expiresAt),
        dsl.createIndexIfNotExists(inProgressIndex)
            .on(table, scope, principal, key)
            .where(state.eq(inline(IN_PROGRESS))));
  }

  /**
   * The sequence, then the table, of {@link #createIfMissing}, each unless it exists; an instance
   * that loses the race to create one to another instance finds the winner's ({@link
   * CreateIfMissing}). Each catalog read bounded by {@code timeout}.
   */
  public void createSequenceAndTable(DSLContext dsl, Duration timeout) {
    CreateIfMissing.relation(
        dsl,
        attemptSequence.getQualifiedName(),
        timeout,
        on -> createIfMissing(on).get(0).execute());
    CreateIfMissing.relation(dsl, tableName, timeout, on -> createIfMissing(on).get(1).execute());
  }

  /** The two indexes of {@link #createIfMissing}, as {@link #createSequenceAndTable} does. */
  public void createIndexes(DSLContext dsl, Duration timeout) {
    CreateIfMissing.index(
        dsl, tableName, expiresIndex, timeout, on -> createIfMissing(on).get(2).execute());
    CreateIfMissing.index(
        dsl, tableName, inProgressIndex, timeout, on -> createIfMissing(on).get(3).execute());
  }

  /**
   * Records the key as in progress for a new attempt, or takes it over from an attempt whose lease
   * ended:
   *
   * <pre>{@code
   * INSERT INTO t AS k (scope, principal, idempotency_key, fingerprint, state, downstream_key,
   *     attempt_token, attempt_count, recovery_point, locked_until, created_at, expires_at)
   * VALUES (:scope, :principal, :key, :fp, 'in_progress', :uuid, nextval(seq), 1, 'started',
   *     clock_timestamp() + :lease, clock_timestamp(), clock_timestamp() + :retention)
   * ON CONFLICT (scope, principal, idempotency_key) DO UPDATE
   *   SET attempt_token = excluded.attempt_token, attempt_count = k.attempt_count + 1,
   *       locked_until = excluded.locked_until,
   *       expires_at = greatest(k.expires_at, excluded.expires_at)
   *   WHERE k.state = 'in_progress' AND k.locked_until <= clock_timestamp()
   *     AND k.fingerprint = excluded.fingerprint
   * RETURNING attempt_token, attempt_count, recovery_point, downstream_key
   * }</pre>
   *
   * A takeover pushes the retention out: it counts from the key's last activity. It leaves {@code
   * downstream_key} as the inserting claim wrote it ({@code :uuid}, fresh per statement, is only
   * used by an insert): a claim whose answer was lost and that is sent again takes the row over, or
   * finds it held, and every attempt of the row gets the same downstream key. Empty: the key exists
   * and is completed, leased, or was first used with another fingerprint.
   */
  public Optional<Claim> claim(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      Fingerprint fingerprintValue,
      Duration lease,
      Duration retention,
      boolean fingerprintCheck,
      int timeoutSeconds) {
    return (fingerprintCheck ? claimSameRequest : claimAnyRequest)
        .fetch(
            dsl,
            scopeValue,
            principalValue,
            keyValue,
            fingerprintValue.value(),
            UUID.randomUUID(),
            PgClock.ceilMillis(retention),
            LeasedRow.leaseMillis(lease))
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(
            r ->
                new Claim(
                    r.get(0, Long.class),
                    r.get(1, Integer.class),
                    r.get(2, String.class),
                    r.get(3, UUID.class)));
  }

  /** {@link #claim}'s statement built for each call: its shape, and what tests compare it with. */
  ResultQuery<Record4<Long, Integer, String, UUID>> builtClaim(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      Fingerprint fingerprintValue,
      UUID downstream,
      Duration lease,
      Duration retention,
      boolean fingerprintCheck) {
    Condition sameRequest =
        fingerprintCheck ? aliasedFingerprint.eq(excluded(fingerprint)) : noCondition();
    return leased
        .claim(lease)
        .key(scope, scopeValue)
        .key(principal, principalValue)
        .key(key, keyValue)
        .onInsert(fingerprint, val(fingerprintValue.value(), fingerprint))
        .onInsert(state, inline(IN_PROGRESS))
        .onInsert(downstreamKey, val(downstream, downstreamKey))
        .holder(attemptToken, attemptSequence.nextval())
        .onInsert(recoveryPoint, inline(Phases.STARTED))
        .onInsert(createdAt, now())
        .onInsert(expiresAt, PgClock.plus(retention))
        .onTakeover(expiresAt, greatest(aliasedExpiresAt, excluded(expiresAt)))
        .onlyIf(aliasedState.eq(inline(IN_PROGRESS)).and(sameRequest))
        .build(dsl)
        .returningResult(attemptToken, attemptCount, recoveryPoint, downstreamKey);
  }

  /** The key's row with the database's current time, if the key exists. */
  public Optional<KeyRow> read(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      int timeoutSeconds) {
    return read.fetch(dsl, scopeValue, principalValue, keyValue)
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(
            r ->
                new KeyRow(
                    r.get(0, String.class),
                    r.get(1, String.class),
                    r.get(2, Integer.class),
                    r.get(3, byte[].class),
                    r.get(4, OffsetDateTime.class),
                    r.get(5, OffsetDateTime.class)));
  }

  /** {@link #read}'s statement built for each call. */
  ResultQuery<?> builtRead(
      DSLContext dsl, String scopeValue, String principalValue, String keyValue) {
    return dsl.select(fingerprint, state, responseStatus, responseBody, lockedUntil, now())
        .from(table)
        .where(keyIs(scopeValue, principalValue, keyValue));
  }

  /**
   * {@code UPDATE t SET recovery_point = :phase, locked_until = clock_timestamp() + :lease,
   * expires_at = greatest(expires_at, clock_timestamp() + :retention) WHERE scope = :scope AND
   * principal = :principal AND idempotency_key = :key AND attempt_token = :token AND state =
   * 'in_progress'}: one row while the attempt still holds the key, none after a takeover.
   */
  public int advance(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      long token,
      String phase,
      Duration lease,
      Duration retention,
      boolean attemptCheck,
      int timeoutSeconds) {
    return dsl.update(table)
        .set(recoveryPoint, phase)
        .set(lockedUntil, PgClock.plus(lease))
        .set(expiresAt, greatest(expiresAt, PgClock.plus(retention)))
        .where(heldBy(scopeValue, principalValue, keyValue, token, attemptCheck))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * {@code UPDATE t SET state = 'completed', recovery_point = 'finished', response_status = :s,
   * response_body = :b, completed_at = clock_timestamp(), locked_until = clock_timestamp(),
   * expires_at = clock_timestamp() + :retention WHERE scope = :scope AND principal = :principal AND
   * idempotency_key = :key AND attempt_token = :token AND state = 'in_progress'}.
   */
  public int complete(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      long token,
      StoredResult result,
      Duration retention,
      boolean attemptCheck,
      int timeoutSeconds) {
    Object[] values = {
      result.status(),
      result.body(),
      PgClock.ceilMillis(retention),
      scopeValue,
      principalValue,
      keyValue,
      token
    };
    return (attemptCheck
            ? completeHeld.query(dsl, values)
            : completeAny.query(dsl, Arrays.copyOf(values, values.length - 1)))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /** {@link #complete}'s statement built for each call. */
  Query builtComplete(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      long token,
      StoredResult result,
      Duration retention,
      boolean attemptCheck) {
    Map<Field<?>, Object> completed = new LinkedHashMap<>();
    completed.put(state, inline(COMPLETED));
    completed.put(recoveryPoint, inline(Phases.FINISHED));
    completed.put(responseStatus, val(result.status(), responseStatus));
    completed.put(responseBody, val(result.body(), responseBody));
    completed.put(completedAt, now());
    completed.put(expiresAt, PgClock.plus(retention));
    return leased.finish(
        dsl, heldBy(scopeValue, principalValue, keyValue, token, attemptCheck), completed);
  }

  /**
   * {@code UPDATE t SET locked_until = clock_timestamp() WHERE ... attempt_token = :token AND state
   * = 'in_progress'}: ends the lease now, so a retry can take over at once; the recovery point
   * stays.
   */
  public int release(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      long token,
      int timeoutSeconds) {
    return leased
        .finish(dsl, heldBy(scopeValue, principalValue, keyValue, token, true), Map.of())
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * Deletes up to {@code batchSize} expired keys, skipping rows another transaction has locked:
   *
   * <pre>{@code
   * WITH expired (scope, principal, idempotency_key) AS MATERIALIZED (
   *   SELECT scope, principal, idempotency_key FROM t
   *   WHERE expires_at <= clock_timestamp()
   *     AND (state = 'completed'
   *          OR (recovery_point = 'started' AND locked_until <= clock_timestamp()))
   *   LIMIT :n FOR UPDATE SKIP LOCKED)
   * DELETE FROM t AS k USING expired
   * WHERE k.scope = expired.scope AND k.principal = expired.principal
   *   AND k.idempotency_key = expired.idempotency_key
   * }</pre>
   *
   * An in-progress key is deleted only while it is still at {@code 'started'}: it has committed
   * nothing, so a later request with it that starts over repeats nothing local. A key past {@code
   * 'started'} has committed a phase and is kept until it completes or is {@linkplain #forget
   * forgotten}; a key whose lease still runs is never deleted. The row lock taken here, re-checked
   * by PostgreSQL on the row's newest version, orders the purge against a takeover or a phase
   * committing on the same key. {@code MATERIALIZED} makes the CTE run once, so no more than {@code
   * n} rows go.
   */
  public int purgeBatch(DSLContext dsl, int batchSize, int timeoutSeconds) {
    CommonTableExpression<Record3<String, String, String>> expired =
        name("expired")
            .fields("scope", "principal", "idempotency_key")
            .asMaterialized(
                select(scope, principal, key)
                    .from(table)
                    .where(
                        expiresAt
                            .le(now())
                            .and(
                                state
                                    .eq(inline(COMPLETED))
                                    .or(
                                        recoveryPoint
                                            .eq(inline(Phases.STARTED))
                                            .and(lockedUntil.le(now())))))
                    .limit(val(batchSize))
                    .forUpdate()
                    .skipLocked());
    return dsl.with(expired)
        .delete(aliased)
        .using(expired)
        .where(
            aliasedScope
                .eq(expired.field("scope", String.class))
                .and(aliasedPrincipal.eq(expired.field("principal", String.class)))
                .and(aliasedKey.eq(expired.field("idempotency_key", String.class))))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * How many keys are abandoned: {@code SELECT count(*) FROM t WHERE} {@link #abandoned()}. Served
   * by the partial index of in-progress keys.
   */
  public int countAbandoned(DSLContext dsl, int timeoutSeconds) {
    return dsl.selectCount()
        .from(table)
        .where(abandoned())
        .queryTimeout(timeoutSeconds)
        .fetchOne(0, int.class);
  }

  /**
   * Up to {@code limit} abandoned keys after {@code (afterScope, afterPrincipal, afterKey)} (all
   * null: from the first), in {@code (scope, principal, idempotency_key)} order: keyset paging, so
   * a page costs the same however deep it is.
   */
  public List<AbandonedRow> listAbandoned(
      DSLContext dsl,
      String afterScope,
      String afterPrincipal,
      String afterKey,
      int limit,
      int timeoutSeconds) {
    Condition after =
        afterScope == null
            ? noCondition()
            : row(scope, principal, key)
                .gt(row(val(afterScope), val(afterPrincipal), val(afterKey)));
    return dsl.select(scope, principal, key, recoveryPoint, attemptCount, createdAt, expiresAt)
        .from(table)
        .where(abandoned().and(after))
        .orderBy(scope, principal, key)
        .limit(val(limit))
        .queryTimeout(timeoutSeconds)
        .fetch(
            r ->
                new AbandonedRow(
                    r.value1(),
                    r.value2(),
                    r.value3(),
                    r.value4(),
                    r.value5(),
                    r.value6().toInstant(),
                    r.value7().toInstant()));
  }

  /**
   * {@code DELETE FROM t WHERE scope = :scope AND principal = :principal AND idempotency_key = :key
   * AND state = 'in_progress' AND locked_until <= clock_timestamp()}: removes an unfinished key no
   * attempt holds.
   */
  public int forget(
      DSLContext dsl,
      String scopeValue,
      String principalValue,
      String keyValue,
      int timeoutSeconds) {
    return dsl.deleteFrom(table)
        .where(keyIs(scopeValue, principalValue, keyValue))
        .and(state.eq(inline(IN_PROGRESS)))
        .and(lockedUntil.le(now()))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * {@code state = 'in_progress' AND recovery_point <> 'started' AND expires_at <=
   * clock_timestamp() AND locked_until <= clock_timestamp()}: a key that committed a phase, that no
   * attempt holds, and whose retention has run out since its last activity. The purge would have
   * deleted it, were it not for the phase it committed.
   */
  private Condition abandoned() {
    return state
        .eq(inline(IN_PROGRESS))
        .and(recoveryPoint.ne(inline(Phases.STARTED)))
        .and(expiresAt.le(now()))
        .and(lockedUntil.le(now()));
  }

  /** The row of one key: every statement on one key names all three columns of the primary key. */
  private Condition keyIs(String scopeValue, String principalValue, String keyValue) {
    return scope.eq(scopeValue).and(principal.eq(principalValue)).and(key.eq(keyValue));
  }

  private Condition heldBy(
      String scopeValue, String principalValue, String keyValue, long token, boolean attemptCheck) {
    Condition row = keyIs(scopeValue, principalValue, keyValue);
    return attemptCheck ? row.and(attemptToken.eq(token)).and(state.eq(inline(IN_PROGRESS))) : row;
  }

  public Name tableName() {
    return tableName;
  }

  @Override
  public String toString() {
    return table.toString();
  }
}
