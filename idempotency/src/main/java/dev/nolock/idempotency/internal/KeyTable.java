package dev.nolock.idempotency.internal;

import static dev.nolock.idempotency.internal.PgFunctions.clockTimestamp;
import static dev.nolock.idempotency.internal.PgFunctions.clockTimestampPlus;
import static org.jooq.impl.DSL.excluded;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.noCondition;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.sequence;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.Phases;
import dev.nolock.idempotency.StoredResult;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;
import org.jooq.CommonTableExpression;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Record2;
import org.jooq.Sequence;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;

/**
 * The keys table, its attempt-token sequence and the statements on them, in jOOQ's typed DSL. The
 * table name is an already validated identifier; every value is bound, only constants are inlined.
 */
public final class KeyTable {

  public static final String IN_PROGRESS = "in_progress";
  public static final String COMPLETED = "completed";

  private static final String ALIAS = "k";

  /** What a successful claim returns. */
  public record Claim(long token, int number, String recoveryPoint) {}

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
  private final Sequence<Long> attemptSequence;
  private final Name expiresIndex;

  private final Field<String> scope =
      field(name("scope"), SQLDataType.VARCHAR(IdempotencyKeys.MAX_SCOPE_LENGTH).nullable(false));
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

  private final Field<String> aliasedFingerprint;
  private final Field<String> aliasedState;
  private final Field<Integer> aliasedAttemptCount;
  private final Field<OffsetDateTime> aliasedLockedUntil;
  private final Field<String> aliasedScope;
  private final Field<String> aliasedKey;

  /** The table {@code tableName} (validated); the sequence and index are named after it. */
  public KeyTable(Name tableName) {
    this.tableName = tableName;
    this.table = table(tableName);
    this.aliased = table.as(ALIAS);
    String last = tableName.last();
    Name sequenceName =
        tableName.qualified()
            ? name(tableName.qualifier().last(), last + "_attempt_seq")
            : name(last + "_attempt_seq");
    this.attemptSequence = sequence(sequenceName, SQLDataType.BIGINT);
    // CREATE INDEX takes no schema: the index lives in its table's schema.
    this.expiresIndex = name(last + "_expires_idx");
    this.aliasedFingerprint = field(name(ALIAS, "fingerprint"), SQLDataType.VARCHAR);
    this.aliasedState = field(name(ALIAS, "state"), SQLDataType.VARCHAR);
    this.aliasedAttemptCount = field(name(ALIAS, "attempt_count"), SQLDataType.INTEGER);
    this.aliasedLockedUntil = field(name(ALIAS, "locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE);
    this.aliasedScope = field(name(ALIAS, "scope"), SQLDataType.VARCHAR);
    this.aliasedKey = field(name(ALIAS, "idempotency_key"), SQLDataType.VARCHAR);
  }

  /** The sequence, the table and the expiry index, each {@code IF NOT EXISTS}, in that order. */
  public List<Query> createIfMissing(DSLContext dsl) {
    return List.of(
        dsl.createSequenceIfNotExists(attemptSequence).startWith(1L),
        dsl.createTableIfNotExists(table)
            .column(scope)
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
            .primaryKey(scope, key)
            .check(state.in(inline(IN_PROGRESS), inline(COMPLETED)))
            .check(attemptToken.gt(inline(0L)))
            .check(attemptCount.gt(inline(0))),
        dsl.createIndexIfNotExists(expiresIndex).on(table, expiresAt));
  }

  /**
   * Records the key as in progress for a new attempt, or takes it over from an attempt whose lease
   * ended:
   *
   * <pre>{@code
   * INSERT INTO t AS k (scope, idempotency_key, fingerprint, state, attempt_token, attempt_count,
   *     recovery_point, locked_until, created_at, expires_at)
   * VALUES (:scope, :key, :fp, 'in_progress', nextval(seq), 1, 'started',
   *     clock_timestamp() + :lease, clock_timestamp(), clock_timestamp() + :retention)
   * ON CONFLICT (scope, idempotency_key) DO UPDATE
   *   SET attempt_token = excluded.attempt_token, attempt_count = k.attempt_count + 1,
   *       locked_until = excluded.locked_until
   *   WHERE k.state = 'in_progress' AND k.locked_until <= clock_timestamp()
   *     AND k.fingerprint = excluded.fingerprint
   * RETURNING attempt_token, attempt_count, recovery_point
   * }</pre>
   *
   * Empty: the key exists and is completed, leased, or was first used with another fingerprint.
   */
  public Optional<Claim> claim(
      DSLContext dsl,
      String scopeValue,
      String keyValue,
      Fingerprint fingerprintValue,
      Duration lease,
      Duration retention,
      boolean fingerprintCheck,
      int timeoutSeconds) {
    Condition sameRequest =
        fingerprintCheck ? aliasedFingerprint.eq(excluded(fingerprint)) : noCondition();
    return dsl.insertInto(
            aliased,
            scope,
            key,
            fingerprint,
            state,
            attemptToken,
            attemptCount,
            recoveryPoint,
            lockedUntil,
            createdAt,
            expiresAt)
        .values(
            val(scopeValue, scope),
            val(keyValue, key),
            val(fingerprintValue.value(), fingerprint),
            inline(IN_PROGRESS),
            attemptSequence.nextval(),
            inline(1),
            inline(Phases.STARTED),
            clockTimestampPlus(lease),
            clockTimestamp(),
            clockTimestampPlus(retention))
        .onConflict(scope, key)
        .doUpdate()
        .set(attemptToken, excluded(attemptToken))
        .set(attemptCount, aliasedAttemptCount.plus(inline(1)))
        .set(lockedUntil, excluded(lockedUntil))
        .where(
            aliasedState
                .eq(inline(IN_PROGRESS))
                .and(aliasedLockedUntil.le(clockTimestamp()))
                .and(sameRequest))
        .returningResult(attemptToken, attemptCount, recoveryPoint)
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(r -> new Claim(r.value1(), r.value2(), r.value3()));
  }

  /** The key's row with the database's current time, if the key exists. */
  public Optional<KeyRow> read(
      DSLContext dsl, String scopeValue, String keyValue, int timeoutSeconds) {
    return dsl.select(
            fingerprint, state, responseStatus, responseBody, lockedUntil, clockTimestamp())
        .from(table)
        .where(scope.eq(scopeValue).and(key.eq(keyValue)))
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(
            r ->
                new KeyRow(r.value1(), r.value2(), r.value3(), r.value4(), r.value5(), r.value6()));
  }

  /**
   * {@code UPDATE t SET recovery_point = :phase, locked_until = clock_timestamp() + :lease WHERE
   * scope = :scope AND idempotency_key = :key AND attempt_token = :token AND state =
   * 'in_progress'}: one row while the attempt still holds the key, none after a takeover.
   */
  public int advance(
      DSLContext dsl,
      String scopeValue,
      String keyValue,
      long token,
      String phase,
      Duration lease,
      boolean attemptCheck,
      int timeoutSeconds) {
    return dsl.update(table)
        .set(recoveryPoint, phase)
        .set(lockedUntil, clockTimestampPlus(lease))
        .where(heldBy(scopeValue, keyValue, token, attemptCheck))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * {@code UPDATE t SET state = 'completed', recovery_point = 'finished', response_status = :s,
   * response_body = :b, completed_at = clock_timestamp(), locked_until = clock_timestamp(),
   * expires_at = clock_timestamp() + :retention WHERE scope = :scope AND idempotency_key = :key AND
   * attempt_token = :token AND state = 'in_progress'}.
   */
  public int complete(
      DSLContext dsl,
      String scopeValue,
      String keyValue,
      long token,
      StoredResult result,
      Duration retention,
      boolean attemptCheck,
      int timeoutSeconds) {
    return dsl.update(table)
        .set(state, inline(COMPLETED))
        .set(recoveryPoint, inline(Phases.FINISHED))
        .set(responseStatus, result.status())
        .set(responseBody, result.body())
        .set(completedAt, clockTimestamp())
        .set(lockedUntil, clockTimestamp())
        .set(expiresAt, clockTimestampPlus(retention))
        .where(heldBy(scopeValue, keyValue, token, attemptCheck))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * {@code UPDATE t SET locked_until = clock_timestamp() WHERE ... attempt_token = :token AND state
   * = 'in_progress'}: ends the lease now, so a retry can take over at once; the recovery point
   * stays.
   */
  public int release(
      DSLContext dsl, String scopeValue, String keyValue, long token, int timeoutSeconds) {
    return dsl.update(table)
        .set(lockedUntil, clockTimestamp())
        .where(heldBy(scopeValue, keyValue, token, true))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * Deletes up to {@code batchSize} expired keys, skipping rows another transaction has locked:
   *
   * <pre>{@code
   * WITH expired (scope, idempotency_key) AS MATERIALIZED (
   *   SELECT scope, idempotency_key FROM t
   *   WHERE expires_at <= clock_timestamp()
   *     AND (state = 'completed' OR locked_until <= clock_timestamp())
   *   LIMIT :n FOR UPDATE SKIP LOCKED)
   * DELETE FROM t AS k USING expired
   * WHERE k.scope = expired.scope AND k.idempotency_key = expired.idempotency_key
   * }</pre>
   *
   * A key whose lease still runs is never deleted, however old. {@code MATERIALIZED} makes the CTE
   * run once, so no more than {@code n} rows go.
   */
  public int purgeBatch(DSLContext dsl, int batchSize, int timeoutSeconds) {
    CommonTableExpression<Record2<String, String>> expired =
        name("expired")
            .fields("scope", "idempotency_key")
            .asMaterialized(
                select(scope, key)
                    .from(table)
                    .where(
                        expiresAt
                            .le(clockTimestamp())
                            .and(state.eq(inline(COMPLETED)).or(lockedUntil.le(clockTimestamp()))))
                    .limit(val(batchSize))
                    .forUpdate()
                    .skipLocked());
    return dsl.with(expired)
        .delete(aliased)
        .using(expired)
        .where(
            aliasedScope
                .eq(expired.field("scope", String.class))
                .and(aliasedKey.eq(expired.field("idempotency_key", String.class))))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  private Condition heldBy(String scopeValue, String keyValue, long token, boolean attemptCheck) {
    Condition row = scope.eq(scopeValue).and(key.eq(keyValue));
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
