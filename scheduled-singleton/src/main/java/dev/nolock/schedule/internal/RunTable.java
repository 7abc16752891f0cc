package dev.nolock.schedule.internal;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.max;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.CreateIfMissing;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.patterns.sql.TableShape;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Optional;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Query;
import org.jooq.Table;
import org.jooq.impl.SQLDataType;

/**
 * The SQL of the runs table: one row per claimed {@code (job, scheduled_at)}, carrying the lease
 * ({@code locked_until}, on the database's clock) and the attempt token. Every value is bound; the
 * table name is validated configuration. Each method is one statement.
 *
 * <p>The row's life: {@link #claim} inserts it as {@code running} with attempt 1, or finds the time
 * already claimed ({@code ON CONFLICT DO NOTHING}); {@link #resumeAttempt} resumes an attempt of
 * this instance whose answer it lost (a claim, a takeover, a finish); {@link #renew} extends the
 * lease of the current attempt; {@link #finish} marks it {@code done} if the attempt is still
 * current; {@link #release} gives it back for a retry; {@link #takeOver} claims an expired run
 * again with the next attempt; {@link #giveUp} and {@link #fail} record it as {@code failed};
 * {@link #purgeFinished} deletes it once no claim, pass or settle needs it.
 */
public final class RunTable {

  public static final String RUNNING = "running";
  public static final String DONE = "done";
  public static final String FAILED = "failed";

  /** The unique key every single-run statement matches by, for {@link SqlErrors#atMostOneRow}. */
  private static final String KEY = "(job, scheduled_at)";

  /** Longest error text stored in {@code last_error}. */
  static final int MAX_ERROR_LENGTH = 2000;

  /**
   * The {@code locked_until} of a released attempt, {@code 1970-01-01T00:00:00Z}: ended, and never
   * renewed again. Finite, so that ordinary queries can subtract it ({@code '-infinity'} raises
   * "cannot subtract infinite timestamps" up to PostgreSQL 16); no lease the database grants is
   * that old.
   */
  static final Instant RELEASED_AT = Instant.EPOCH;

  private static final Field<OffsetDateTime> RELEASED = val(at(RELEASED_AT));

  private final Name qualified;
  private final Table<?> table;
  private final String tableName;
  private final Name indexName;
  private final int timeoutSeconds;
  private final TableShape shape;

  final Field<String> job = field(name("job"), SQLDataType.VARCHAR(255).nullable(false));
  final Field<OffsetDateTime> scheduledAt =
      field(name("scheduled_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  final Field<String> state = field(name("state"), SQLDataType.VARCHAR(16).nullable(false));
  final Field<Long> attempt = field(name("attempt"), SQLDataType.BIGINT.nullable(false));
  final Field<String> owner =
      field(name("owner"), SQLDataType.VARCHAR(Lease.MAX_OWNER_LENGTH).nullable(false));
  final Field<OffsetDateTime> lockedUntil =
      field(name("locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));
  final Field<OffsetDateTime> coversFrom =
      field(name("covers_from"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  final Field<Long> missed = field(name("missed"), SQLDataType.BIGINT.nullable(false));
  final Field<OffsetDateTime> claimedAt =
      field(name("claimed_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(false));
  final Field<OffsetDateTime> finishedAt =
      field(name("finished_at"), SQLDataType.TIMESTAMPWITHTIMEZONE.nullable(true));
  final Field<String> lastError = field(name("last_error"), SQLDataType.CLOB.nullable(true));

  /** A claimed (or re-claimed) run as the database granted it. */
  public record Claim(Instant scheduledAt, long attempt, Instant coversFrom, long missed) {}

  /** A running run whose lease has expired. */
  public record Expired(Instant scheduledAt, long attempt) {}

  /**
   * A run's state ({@link #RUNNING}, {@link #DONE}, {@link #FAILED}), its current attempt and the
   * identity of that attempt's instance.
   */
  public record Current(String state, long attempt, String owner) {

    /** True when {@code attemptValue} finished the run. */
    public boolean finishedBy(long attemptValue) {
      return state.equals(DONE) && attempt == attemptValue;
    }
  }

  /**
   * @param tableName the configured table, {@code table} or {@code schema.table}
   * @param queryTimeout the JDBC timeout of every statement, rounded up to whole seconds
   */
  public RunTable(String tableName, Duration queryTimeout) {
    this.qualified = SqlNames.requireSqlIdentifier("runs table", tableName);
    this.table = table(qualified);
    this.tableName = tableName;
    // An index lives in its table's schema and takes an unqualified name.
    String last = qualified.last();
    this.indexName = name((last.length() > 50 ? last.substring(0, 50) : last) + "_expiry_idx");
    long seconds = queryTimeout.toSeconds() + (queryTimeout.toNanosPart() > 0 ? 1 : 0);
    this.timeoutSeconds = (int) Math.max(1, seconds);
    this.shape =
        TableShape.of(qualified)
            .columns(
                List.of(
                    job,
                    scheduledAt,
                    state,
                    attempt,
                    owner,
                    lockedUntil,
                    coversFrom,
                    missed,
                    claimedAt,
                    finishedAt,
                    // text in the DDL; a varchar holds it if it is as wide as the longest stored
                    field(
                        name("last_error"), SQLDataType.VARCHAR(MAX_ERROR_LENGTH).nullable(true))))
            .uniqueKey(job, scheduledAt);
  }

  /** The DDL {@link #createIfMissing} runs: the table, then a partial index for takeovers. */
  public List<Query> ddl(DSLContext dsl) {
    return List.of(
        dsl.createTableIfNotExists(table)
            .column(job)
            .column(scheduledAt)
            .column(state)
            .column(attempt)
            .column(owner)
            .column(lockedUntil)
            .column(coversFrom)
            .column(missed)
            .column(claimedAt)
            .column(finishedAt)
            .column(lastError)
            .primaryKey(job, scheduledAt)
            .check(state.in(inline(RUNNING), inline(DONE), inline(FAILED)))
            .check(attempt.gt(inline(0L)))
            .check(missed.ge(inline(0L))),
        dsl.createIndexIfNotExists(indexName)
            .on(table, job, lockedUntil)
            .where(state.eq(inline(RUNNING))));
  }

  /** {@link #ddl} as SQL text, one statement per element. */
  public List<String> ddlSql(DSLContext dsl) {
    return ddl(dsl).stream().map(Query::getSQL).toList();
  }

  /**
   * Creates the table unless it exists, checks that the table the name resolves to has a shape the
   * statements of this class can use ({@link #shapeProblems}), then creates the index unless it
   * exists. A table of another shape is refused before anything else is created. Instances that
   * start at once may all call it: one that loses the race to create the table or the index finds
   * the winner's ({@link CreateIfMissing}), and checks the table the same way.
   *
   * @throws SchemaMismatchException when the existing table cannot be used
   */
  public void createIfMissing(DSLContext dsl) {
    Duration timeout = Duration.ofSeconds(timeoutSeconds);
    OwnTransaction.run(
        dsl,
        d -> {
          CreateIfMissing.relation(d, qualified, timeout, on -> ddl(on).get(0).execute());
          List<String> problems = shapeProblems(d);
          if (!problems.isEmpty()) {
            throw new SchemaMismatchException(tableName, String.join("; ", problems), ddlSql(d));
          }
          CreateIfMissing.index(d, qualified, indexName, timeout, on -> ddl(on).get(1).execute());
          return null;
        });
  }

  /**
   * What keeps the statements of this class from working on the existing table, empty when nothing:
   * the shared catalog check ({@link TableShape}) of the relation the configured name resolves to.
   *
   * <ul>
   *   <li>each column of {@link #ddl} must exist, with a type that holds its values: a timestamp
   *       must carry its time zone (without one PostgreSQL converts through the session's zone), a
   *       text column may be {@code text} or a {@code varchar} at least as wide ({@code last_error}
   *       {@value #MAX_ERROR_LENGTH}, the longest error stored);
   *   <li>a column set to {@code NULL} here ({@code locked_until}, {@code finished_at}, {@code
   *       last_error}) must be nullable;
   *   <li>any other column must be nullable or have a default, or the claim's insert fails;
   *   <li>a unique key on exactly {@code (job, scheduled_at)}, immediate and without a predicate,
   *       must exist: the claim's {@code ON CONFLICT (job, scheduled_at)} needs it, and it is what
   *       lets one claim per scheduled time through.
   * </ul>
   */
  List<String> shapeProblems(DSLContext dsl) {
    return shape.problems(dsl, Duration.ofSeconds(timeoutSeconds));
  }

  /** The latest scheduled time of {@code jobName} claimed before {@code before}, in any state. */
  public Optional<Instant> latestClaimedBefore(DSLContext dsl, String jobName, Instant before) {
    OffsetDateTime value =
        dsl.select(max(scheduledAt))
            .from(table)
            .where(job.eq(jobName).and(scheduledAt.lt(at(before))))
            .queryTimeout(timeoutSeconds)
            .fetchOne(0, OffsetDateTime.class);
    return Optional.ofNullable(value).map(OffsetDateTime::toInstant);
  }

  /**
   * Serialises the claims of {@code jobName} on this table until the transaction ends. Run it as
   * the first statement of the claim's transaction, on its own: under READ COMMITTED the {@link
   * #claim} that follows takes its snapshot after the lock is granted, so it sees every claim of
   * the job that committed before, including one of another time still open when this one started
   * (a statement's snapshot does not see uncommitted rows, and {@code ON CONFLICT} waits only for a
   * row of the same key).
   *
   * <ol>
   *   <li>Resolve the table as the claim will, on this connection's search path: {@code CAST(:table
   *       AS regclass)}, the quoted configured name bound. The key follows the table, not its
   *       spelling, so instances configured with {@code runs} and {@code public.runs} (or with
   *       search paths that lead to the same table) take the same lock. A missing table fails the
   *       statement ({@code relation "..." does not exist}, SQLState 42P01, as the claim's insert
   *       would): {@code to_regclass} would give null, {@code hashtextextended} of null is null,
   *       and {@code pg_advisory_xact_lock(null)} returns without locking anything.
   *   <li>{@code SELECT pg_advisory_xact_lock(hashtextextended(:namespace || oid::text || :rest,
   *       0))} in the same statement, with {@code :namespace} {@code 'nolock.schedule.claims:'}
   *       ({@link AdvisoryLockNamespace#SCHEDULE_CLAIMS}) and {@code :rest} {@code '/' || job}
   *       bound. The input is the namespace's framing ({@link AdvisoryLockNamespace#key(Field)}),
   *       so it stays within the namespace; inside it, the OID is digits only, so its first {@code
   *       '/'} ends the OID and (OID, job) can be read back.
   * </ol>
   */
  public void lockClaims(DSLContext dsl, String jobName) {
    Field<String> oid =
        field("CAST({0} AS regclass)::oid::text", String.class, val(SqlNames.regclass(qualified)));
    dsl.resultQuery(
            "SELECT pg_advisory_xact_lock({0})",
            AdvisoryLockNamespace.SCHEDULE_CLAIMS.key(oid.concat(val("/" + jobName))))
        .queryTimeout(timeoutSeconds)
        .fetch();
  }

  /**
   * What the database decided about one claim, with its clock when it decided: exactly one of
   * granted, {@code existing} (the time's row was there: its state, attempt and owner), {@code
   * later} (the job has a run of a later time), {@code tooOld}, {@code ahead}, {@code unplanned}
   * (the job has a run of an earlier time that the claim's plan did not know of: it committed after
   * the plan read its floor), or none of them: the insert met a row committed while the statement
   * ran (another instance's claim, lost race).
   */
  public record ClaimDecision(
      Optional<Claim> granted,
      Optional<Current> existing,
      Optional<Instant> later,
      boolean tooOld,
      boolean ahead,
      Optional<Instant> unplanned,
      Instant databaseTime) {}

  /**
   * Claims {@code time} and says why not, in one statement: reads {@code clock_timestamp()} once,
   * the time's row, the job's latest later time and its latest time in {@code (:known, :t)}, and
   * inserts only when there is none of them and {@code clock_timestamp() - :window <= :t <=
   * clock_timestamp() + :tolerance}:
   *
   * <pre>{@code
   * WITH c AS (SELECT clock_timestamp() AS now),
   *   e AS (SELECT state, attempt, owner FROM t WHERE job = :job AND scheduled_at = :t),
   *   l AS (SELECT max(scheduled_at) AS at FROM t WHERE job = :job AND scheduled_at > :t),
   *   u AS (SELECT max(scheduled_at) AS at FROM t WHERE job = :job AND scheduled_at < :t
   *           AND scheduled_at > coalesce(:known, '-infinity')),
   *   v AS (SELECT c.now, l.at AS later, u.at AS unplanned, :t < c.now - :window AS too_old,
   *                :t > c.now + :tolerance AS ahead FROM c, l, u),
   *   i AS (INSERT INTO t (...) SELECT :job, :t, 'running', 1, :owner, clock_timestamp() + :lease, ...
   *         FROM v WHERE NOT too_old AND NOT ahead AND later IS NULL AND unplanned IS NULL
   *           AND NOT EXISTS (SELECT 1 FROM e)
   *         ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING attempt)
   * SELECT v.*, (SELECT attempt FROM i), e.* FROM v LEFT JOIN e ON true
   * }</pre>
   *
   * The lease starts when the row is inserted ({@code clock_timestamp()} there, not {@code v.now}),
   * so an insert that waited for a conflicting row gets all of it. A later run refuses the claim
   * because an instance claims the times of a job in increasing order (a catch-up oldest first,
   * each pass after the last), so a time older than the job's latest run was run, counted missed by
   * that run, deleted by retention, or lies before the job's first run; see the README. That holds
   * only if every claim is made on a plan that knew the job's latest earlier run, so an unplanned
   * run refuses it: a run the plan did not know of lies in the span the claim would cover (a job
   * that processes {@code [coversFrom, scheduledAt]} would process it twice), or among the times
   * the plan counted missed, or, when the plan saw no run at all and started at the instance's
   * start, before a time the plan left out as older than the job; claimed anyway, that time would
   * be refused later as superseded and never run nor be counted. The caller plans again from the
   * table. The time's row, a later run and the window's bound ahead take precedence; an unplanned
   * run takes precedence over the bound back, so a stale plan does not report its missed count.
   *
   * @param known the latest time before {@code time} that the plan accounts for: the run it read as
   *     its floor, then the plan's previous time (which may have no row: refused as too old or
   *     superseded); empty when the plan saw no run of the job
   */
  public ClaimDecision claim(
      DSLContext dsl,
      String jobName,
      Instant time,
      String ownerName,
      Duration lease,
      Duration window,
      Duration tolerance,
      Optional<Instant> known,
      Instant covers,
      long missedBefore) {
    Field<OffsetDateTime> t = val(at(time));
    Field<String> j = val(jobName);
    org.jooq.Record r =
        dsl.resultQuery(
                "WITH c AS (SELECT clock_timestamp() AS now),"
                    + " e AS (SELECT state, attempt, owner FROM {0} WHERE job = {1} AND"
                    + " scheduled_at = {2}),"
                    + " l AS (SELECT max(scheduled_at) AS at FROM {0} WHERE job = {1} AND"
                    + " scheduled_at > {2}),"
                    + " u AS (SELECT max(scheduled_at) AS at FROM {0} WHERE job = {1} AND"
                    + " scheduled_at < {2} AND scheduled_at > coalesce({10},"
                    + " CAST('-infinity' AS timestamptz))),"
                    + " v AS (SELECT c.now, l.at AS later, u.at AS unplanned,"
                    + " {2} < c.now - {3} AS too_old,"
                    + " {2} > c.now + {4} AS ahead FROM c, l, u),"
                    + " i AS (INSERT INTO {0} (job, scheduled_at, state, attempt, owner,"
                    + " locked_until, covers_from, missed, claimed_at)"
                    + " SELECT {1}, {2}, {5}, 1, {6},"
                    + " {7}, {8},"
                    + " {9}, v.now FROM v WHERE NOT v.too_old AND NOT v.ahead AND v.later IS NULL"
                    + " AND v.unplanned IS NULL"
                    + " AND NOT EXISTS (SELECT 1 FROM e)"
                    + " ON CONFLICT (job, scheduled_at) DO NOTHING RETURNING attempt)"
                    + " SELECT v.now, v.later, v.unplanned, v.too_old, v.ahead,"
                    + " (SELECT attempt FROM i) AS"
                    + " granted, e.state, e.attempt, e.owner FROM v LEFT JOIN e ON true",
                table,
                j,
                t,
                PgClock.interval(window),
                PgClock.interval(tolerance),
                val(RUNNING),
                val(ownerName),
                PgClock.plus(lease),
                val(at(covers)),
                val(missedBefore),
                val(known.map(RunTable::at).orElse(null), SQLDataType.TIMESTAMPWITHTIMEZONE))
            .queryTimeout(timeoutSeconds)
            .fetchOne();
    Long granted = r.get("granted", Long.class);
    String existingState = r.get("state", String.class);
    OffsetDateTime later = r.get("later", OffsetDateTime.class);
    return new ClaimDecision(
        Optional.ofNullable(granted).map(a -> new Claim(time, a, covers, missedBefore)),
        existingState == null
            ? Optional.empty()
            : Optional.of(
                new Current(
                    existingState, r.get("attempt", Long.class), r.get("owner", String.class))),
        Optional.ofNullable(later).map(OffsetDateTime::toInstant),
        Boolean.TRUE.equals(r.get("too_old", Boolean.class)),
        Boolean.TRUE.equals(r.get("ahead", Boolean.class)),
        Optional.ofNullable(r.get("unplanned", OffsetDateTime.class))
            .map(OffsetDateTime::toInstant),
        r.get("now", OffsetDateTime.class).toInstant());
  }

  /**
   * Resumes an attempt of this instance whose answer it lost, so that it runs now: a claim or a
   * takeover that committed while the connection dropped (the instance never learnt it had won), or
   * an attempt whose fenced finish did not commit (its writes rolled back with it). {@code UPDATE
   * ... SET locked_until = clock_timestamp() + :lease WHERE job = :job AND scheduled_at = :t AND
   * state = 'running' AND attempt = :attempt AND owner = :identity RETURNING attempt, covers_from,
   * missed}. Empty: the attempt never landed, finished, or was taken over (or given up) since.
   *
   * <p>{@code (attempt, identity)} names one grant: an attempt number is handed out once per run,
   * and the identity is unique per instance ({@link InstanceIdentity}). Its instance knows it has
   * no effect yet, so the statement is not conditional on the lease: resuming it after its lease
   * lapsed is as safe as a takeover, and spends no attempt on a run no job threw in and no instance
   * crashed in. A concurrent {@link #takeOver} or {@link #giveUp} waits for the row lock and
   * re-checks its conditions on the committed row (READ COMMITTED), and a finish of this attempt
   * still in an open transaction on the server makes this statement wait for it, so exactly one of
   * them wins.
   */
  public Optional<Claim> resumeAttempt(
      DSLContext dsl,
      String jobName,
      Instant time,
      long currentAttempt,
      String identity,
      Duration lease) {
    return dsl.update(table)
        .set(lockedUntil, PgClock.plus(lease))
        .where(currentRun(jobName, time, currentAttempt))
        .and(owner.eq(identity))
        .returning(attempt, coversFrom, missed)
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(r -> claimOf(time, r.get(attempt), r.get(coversFrom), r.get(missed)));
  }

  /** The state, attempt and owner of the run at {@code time}; empty when it was never claimed. */
  public Optional<Current> current(DSLContext dsl, String jobName, Instant time) {
    return dsl.select(state, attempt, owner)
        .from(table)
        .where(job.eq(jobName))
        .and(scheduledAt.eq(at(time)))
        .queryTimeout(timeoutSeconds)
        .fetchOptional(r -> new Current(r.value1(), r.value2(), r.value3()));
  }

  /** Running runs of {@code jobName} whose lease has expired, oldest first. */
  public List<Expired> expired(DSLContext dsl, String jobName, int limit) {
    return dsl.select(scheduledAt, attempt)
        .from(table)
        .where(job.eq(jobName))
        .and(state.eq(RUNNING))
        .and(lockedUntil.lt(PgClock.now()))
        .orderBy(scheduledAt)
        .limit(limit)
        .queryTimeout(timeoutSeconds)
        .fetch(r -> new Expired(r.value1().toInstant(), r.value2()));
  }

  /**
   * Takes an expired run over with the next attempt: {@code UPDATE ... SET attempt = attempt + 1,
   * owner = :owner, locked_until = clock_timestamp() + :lease WHERE job = :job AND scheduled_at =
   * :t AND state = 'running' AND locked_until < clock_timestamp() AND attempt < :maxAttempts
   * RETURNING ...}, whatever the age of the scheduled time: the claim window bounds new claims
   * only, and an interrupted run is retried until its attempts are spent. Under READ COMMITTED a
   * concurrent finish or takeover holds the row lock; this statement waits for it and re-checks the
   * conditions on the committed row, so exactly one of them wins.
   */
  public Optional<Claim> takeOver(
      DSLContext dsl,
      String jobName,
      Instant time,
      String ownerName,
      Duration lease,
      int maxAttempts) {
    Field<Long> next = attempt.plus(inline(1L));
    return dsl.update(table)
        .set(attempt, next)
        .set(owner, ownerName)
        .set(lockedUntil, PgClock.plus(lease))
        .set(claimedAt, PgClock.now())
        .where(expiredRun(jobName, time))
        .and(attempt.lt((long) maxAttempts))
        .returning(attempt, coversFrom, missed)
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(r -> claimOf(time, r.get(attempt), r.get(coversFrom), r.get(missed)));
  }

  /**
   * Records an expired run out of attempts as failed: the conditions of {@link #takeOver} with
   * {@code attempt >= :maxAttempts}, the reason in {@code last_error}. Returns the number of
   * attempts it had.
   */
  public Optional<Long> giveUp(DSLContext dsl, String jobName, Instant time, int maxAttempts) {
    return dsl.update(table)
        .set(state, FAILED)
        .setNull(lockedUntil)
        .set(finishedAt, PgClock.now())
        .set(
            lastError,
            val(
                "gave up: the lease of the last of "
                    + maxAttempts
                    + " attempts expired unfinished"))
        .where(expiredRun(jobName, time))
        .and(attempt.ge((long) maxAttempts))
        .returning(attempt)
        .queryTimeout(timeoutSeconds)
        .fetchOptional()
        .map(r -> r.get(attempt));
  }

  /**
   * Extends the lease of the current attempt: {@code UPDATE ... SET locked_until =
   * clock_timestamp() + :lease WHERE job = :job AND scheduled_at = :t AND state = 'running' AND
   * attempt = :attempt}, a compare-and-swap on the attempt token, never a blind bump. False: the
   * run was taken over, given up, finished or released ({@code AND locked_until >
   * '1970-01-01T00:00:00Z'}: {@link #release} ends the lease with that marker, so a renewal that
   * was on its way when the job threw does not extend the released lease and delay the retry).
   *
   * <p>It does not require the lease to be unexpired. A lease that ran out while nobody took the
   * run over (a database outage longer than the lease) is still this attempt's: refusing it would
   * abandon a run that is still running and let a later scan start the next attempt beside it. The
   * attempt orders renewal against takeover: {@link #takeOver} and this statement both take the row
   * lock, and under READ COMMITTED the later one re-checks its condition on the committed row, so
   * after a takeover this attempt's renewal matches nothing, also when it is a resend of a renewal
   * whose answer was lost. With {@code attemptCheck} false (the tests' negative control only) the
   * running run is matched by job and time alone, released or not.
   *
   * <p>Not the shared {@code LeasedRow.extend}: that one adds {@code locked_until >
   * clock_timestamp()}, which this statement must not (the outage case above).
   *
   * @throws IllegalStateException when it matched more than one row (the table lost its key)
   */
  public boolean renew(
      DSLContext dsl,
      String jobName,
      Instant time,
      long currentAttempt,
      Duration lease,
      boolean attemptCheck) {
    Condition which =
        attemptCheck
            ? currentRun(jobName, time, currentAttempt).and(lockedUntil.gt(RELEASED))
            : job.eq(jobName).and(scheduledAt.eq(at(time))).and(state.eq(RUNNING));
    int rows =
        dsl.update(table)
            .set(lockedUntil, PgClock.plus(lease))
            .where(which)
            .queryTimeout(timeoutSeconds)
            .execute();
    return SqlErrors.atMostOneRow(rows, "renewal of " + jobName + " " + time, tableName, KEY);
  }

  /**
   * Finishes the run: {@code UPDATE ... SET state = 'done' WHERE job = :job AND scheduled_at = :t
   * AND attempt = :attempt AND state = 'running'}. Run it on the job's transaction; 0 rows means
   * the attempt is stale and the transaction must roll back. With {@code attemptCheck} false (the
   * tests' negative control only) the run is matched by job and time alone.
   *
   * <p>Not the shared {@code LeasedRow.finish}: that ends the lease at {@code clock_timestamp()},
   * where a finished run here has no lease at all ({@code NULL}, as {@link #fail} and {@link
   * #giveUp} leave it), and it would not set the state.
   *
   * @return true when the run is finished by this attempt; false when the attempt is stale
   * @throws IllegalStateException when it matched more than one row (the table lost its key)
   */
  public boolean finish(
      DSLContext dsl, String jobName, Instant time, long currentAttempt, boolean attemptCheck) {
    Condition which =
        attemptCheck
            ? currentRun(jobName, time, currentAttempt)
            : job.eq(jobName).and(scheduledAt.eq(at(time)));
    int rows =
        dsl.update(table)
            .set(state, DONE)
            .setNull(lockedUntil)
            .set(finishedAt, PgClock.now())
            .setNull(lastError)
            .where(which)
            .queryTimeout(timeoutSeconds)
            .execute();
    return SqlErrors.atMostOneRow(rows, "finish of " + jobName + " " + time, tableName, KEY);
  }

  /**
   * Gives the current attempt back for a retry after the job threw: {@code locked_until =
   * '1970-01-01T00:00:00Z'} ({@link #RELEASED_AT}), a lease that has ended and is marked released,
   * so the next takeover scan of any instance claims it with the next attempt and no renewal of
   * this attempt extends it again.
   */
  public boolean release(
      DSLContext dsl, String jobName, Instant time, long currentAttempt, String error) {
    int rows =
        dsl.update(table)
            .set(lockedUntil, RELEASED)
            .set(lastError, truncate(error))
            .where(currentRun(jobName, time, currentAttempt))
            .queryTimeout(timeoutSeconds)
            .execute();
    return SqlErrors.atMostOneRow(rows, "release of " + jobName + " " + time, tableName, KEY);
  }

  /** Records the current attempt's failure as final. */
  public boolean fail(
      DSLContext dsl, String jobName, Instant time, long currentAttempt, String error) {
    int rows =
        dsl.update(table)
            .set(state, FAILED)
            .setNull(lockedUntil)
            .set(finishedAt, PgClock.now())
            .set(lastError, truncate(error))
            .where(currentRun(jobName, time, currentAttempt))
            .queryTimeout(timeoutSeconds)
            .execute();
    return SqlErrors.atMostOneRow(
        rows, "failure record of " + jobName + " " + time, tableName, KEY);
  }

  /**
   * Deletes up to {@code batch} finished runs of {@code jobName}, oldest first, that no claim, pass
   * or settle reads again, and returns how many:
   *
   * <pre>{@code
   * DELETE FROM t WHERE job = :job AND state IN ('done', 'failed') AND scheduled_at IN (
   *   SELECT scheduled_at FROM t WHERE job = :job AND state IN ('done', 'failed')
   *     AND finished_at < clock_timestamp() - :keep
   *     AND scheduled_at < clock_timestamp() - :window
   *     AND scheduled_at < (SELECT max(scheduled_at) FROM t WHERE job = :job)
   *   ORDER BY scheduled_at LIMIT :batch)
   * }</pre>
   *
   * The job's newest row stays: it refuses every claim of an older time ({@link #claim}'s {@code
   * later}) and is the floor of the next pass. A row scheduled inside the claim window stays: its
   * time could still be claimed, and its row answers that claim ({@code existing}), a second
   * protection beside the newest row. A row finished less than {@code keep} ago stays (the caller
   * makes {@code keep} at least the window): an instance whose finish answer was lost reads it to
   * learn its true outcome. A running row (in flight, released for a retry, or waiting for a
   * takeover) never matches; one that finishes while this statement runs is re-checked on its
   * committed version ({@code state} in the outer condition) or, unseen by the snapshot, kept.
   */
  public int purgeFinished(
      DSLContext dsl, String jobName, Duration keep, Duration window, int batch) {
    return dsl.query(
            "DELETE FROM {0} WHERE job = {1} AND state IN ({2}, {3}) AND scheduled_at IN ("
                + " SELECT scheduled_at FROM {0} WHERE job = {1} AND state IN ({2}, {3})"
                + " AND finished_at < {4}"
                + " AND scheduled_at < {5}"
                + " AND scheduled_at < (SELECT max(scheduled_at) FROM {0} WHERE job = {1})"
                + " ORDER BY scheduled_at LIMIT {6})",
            table,
            val(jobName),
            val(DONE),
            val(FAILED),
            PgClock.minus(keep),
            PgClock.minus(window),
            val(batch))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  /**
   * The tests' negative control only: the naive retention, every run of {@code jobName} scheduled
   * more than {@code age} ago, in whatever state, the newest and those inside the claim window
   * included. Up to {@code batch} rows, oldest first.
   */
  public int purgeAnyForNegativeControl(DSLContext dsl, String jobName, Duration age, int batch) {
    return dsl.query(
            "DELETE FROM {0} WHERE job = {1} AND scheduled_at IN ("
                + " SELECT scheduled_at FROM {0} WHERE job = {1}"
                + " AND scheduled_at < {2}"
                + " ORDER BY scheduled_at LIMIT {3})",
            table, val(jobName), PgClock.minus(age), val(batch))
        .queryTimeout(timeoutSeconds)
        .execute();
  }

  private Condition currentRun(String jobName, Instant time, long currentAttempt) {
    return job.eq(jobName)
        .and(scheduledAt.eq(at(time)))
        .and(attempt.eq(currentAttempt))
        .and(state.eq(RUNNING));
  }

  private Condition expiredRun(String jobName, Instant time) {
    return job.eq(jobName)
        .and(scheduledAt.eq(at(time)))
        .and(state.eq(RUNNING))
        .and(lockedUntil.lt(PgClock.now()));
  }

  private static Claim claimOf(
      Instant time, long attemptValue, OffsetDateTime covers, long missedValue) {
    return new Claim(time, attemptValue, covers.toInstant(), missedValue);
  }

  static OffsetDateTime at(Instant instant) {
    return OffsetDateTime.ofInstant(instant, ZoneOffset.UTC);
  }

  private static String truncate(String error) {
    if (error == null) {
      return null;
    }
    return error.length() <= MAX_ERROR_LENGTH ? error : error.substring(0, MAX_ERROR_LENGTH);
  }
}
