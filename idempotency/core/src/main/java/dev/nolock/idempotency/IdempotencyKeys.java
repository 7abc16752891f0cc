package dev.nolock.idempotency;

import dev.nolock.idempotency.internal.KeyExecutor;
import dev.nolock.idempotency.internal.KeyTable;
import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.sql.SqlNames;
import java.util.List;
import java.util.Objects;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * Idempotency keys on PostgreSQL: the action for a {@code (scope, caller, key)} takes effect once,
 * however often and however concurrently the request is repeated; repeats get the stored result.
 *
 * <p>Keys belong to their {@link Caller}: the same key from two callers is two independent
 * requests, each with its own run, stored result and fingerprint check, so one caller cannot learn
 * whether another used a key, receive its result or claim its key first. Every statement names the
 * key by {@code (scope, principal, idempotency_key)}, the table's primary key. The anonymous caller
 * is one key space shared by everyone unauthenticated (see {@link Caller#anonymous()}).
 *
 * <p>Guarantee: for each key, the local database effects of at most one attempt's final phase
 * commit, together with the stored result; of each intermediate phase, at most one attempt's
 * commit, together with the recovery point. This holds across crashes, pauses (GC, SIGSTOP) and
 * concurrent retries, because every commit is conditional on the attempt token, which the database
 * bumps on every takeover. A repeat with the same fingerprint after completion returns the stored
 * result without running anything; with another fingerprint it is refused.
 *
 * <p>Algorithm of {@link #execute(String, Caller, String, Fingerprint, Phases)}:
 *
 * <ol>
 *   <li><b>Claim</b> (one statement, own transaction): insert the key as {@code in_progress} with
 *       attempt token {@code nextval(seq)}, recovery point {@value Phases#STARTED}, lease {@code
 *       locked_until = clock_timestamp() + lease} and a random downstream key; on conflict take the
 *       key over, with a fresh token and the row's downstream key unchanged, only if it is in
 *       progress, its lease has ended on the database's clock, and the fingerprint is the same.
 *   <li><b>Not claimed</b>: read the row. Another fingerprint → {@link
 *       Outcome.KeyReusedWithDifferentRequest}; completed → {@link Outcome.Replayed} with the
 *       stored result; leased → {@link Outcome.RequestInProgress} (or wait with backoff, if {@link
 *       IdempotencyConfig.Builder#waitWhileInProgress} says so, and go to 1; while {@link
 *       IdempotencyConfig.Builder#maxWaitingWhileInProgress} calls wait already, a call does not
 *       wait and gets {@code RequestInProgress} at once).
 *   <li><b>Claimed</b>: resume after the key's recovery point. Each intermediate phase runs in a
 *       transaction that ends with {@code UPDATE ... SET recovery_point = :phase, locked_until =
 *       clock_timestamp() + lease WHERE scope = :s AND principal = :p AND idempotency_key = :k AND
 *       attempt_token = :a AND state = 'in_progress'}.
 *   <li>The final phase runs in a transaction that ends with the same conditional update setting
 *       {@code state = 'completed'} and the encoded result → {@link Outcome.Completed}.
 *   <li>An update that matches no row means a retry took the key over (this attempt was paused or
 *       slow past its lease): the transaction rolls back, effects included → {@link
 *       Outcome.StaleAttempt}, counted.
 *   <li>A phase that throws, a checked exception or not, rolls back; the {@link FailurePolicy}
 *       makes the failure final (stored like a result) or releases the key ({@code locked_until =
 *       clock_timestamp()}) and rethrows it unchanged.
 * </ol>
 *
 * <p>Retention ({@link #purgeExpired()}): a completed key is kept for the retention after it
 * completed; an in-progress key still at {@value Phases#STARTED} for the retention after its last
 * claim or takeover; an in-progress key past {@value Phases#STARTED} until it completes or an
 * operator {@linkplain #forget forgets} it, because a phase of it committed and a later request
 * must resume after that phase. Each takeover and each committed phase pushes the key's expiry out.
 *
 * <p>Keys: {@link #requireValidKey}. Scopes: {@link #requireValidScope}; the scope is a metrics
 * tag, so name the operation ({@code "payments.create"}), never a per-request value (past {@link
 * IdempotencyConfig.Builder#maxMeteredScopes} distinct scopes, the others share one series).
 * Immutable and thread-safe; give it a pool.
 *
 * @param <R> the result type, stored through a {@link ResultCodec}
 */
public final class IdempotencyKeys<R> {

  /** Longest key: the draft sets no limit, Stripe accepts 255 characters. */
  public static final int MAX_KEY_LENGTH = 255;

  /** Longest scope; the scope is a metrics tag (see {@link CoordinationMetrics}). */
  public static final int MAX_SCOPE_LENGTH = CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH;

  /** Most keys {@link #abandonedKeys(int)} returns per page. */
  public static final int MAX_PAGE_SIZE = 1000;

  private final IdempotencyConfig config;
  private final KeyExecutor<R> executor;

  private IdempotencyKeys(
      DataSource dataSource,
      IdempotencyConfig config,
      ResultCodec<R> codec,
      FailurePolicy<R> failurePolicy,
      Safeguards safeguards) {
    Objects.requireNonNull(dataSource, "dataSource");
    this.config = Objects.requireNonNull(config, "config");
    KeyTable table =
        new KeyTable(SqlNames.requireSqlIdentifier("idempotency keys table", config.table()));
    this.executor =
        new KeyExecutor<>(
            DSL.using(dataSource, SQLDialect.POSTGRES),
            config,
            codec,
            failurePolicy,
            safeguards,
            table);
    executor.registerGauge();
  }

  /**
   * Keys on the pool {@code dataSource}; every exception of an action releases the key for a retry
   * ({@link FailurePolicy#releaseOnEveryFailure()}).
   */
  public static <R> IdempotencyKeys<R> create(
      DataSource dataSource, IdempotencyConfig config, ResultCodec<R> codec) {
    return create(dataSource, config, codec, FailurePolicy.releaseOnEveryFailure());
  }

  /** Keys on the pool {@code dataSource}, with {@code failurePolicy} for exceptions of actions. */
  public static <R> IdempotencyKeys<R> create(
      DataSource dataSource,
      IdempotencyConfig config,
      ResultCodec<R> codec,
      FailurePolicy<R> failurePolicy) {
    return new IdempotencyKeys<>(dataSource, config, codec, failurePolicy, Safeguards.ALL);
  }

  /** For negative-control tests only: the same, with safeguards switched off. */
  static <R> IdempotencyKeys<R> withSafeguards(
      DataSource dataSource,
      IdempotencyConfig config,
      ResultCodec<R> codec,
      FailurePolicy<R> failurePolicy,
      Safeguards safeguards) {
    return new IdempotencyKeys<>(dataSource, config, codec, failurePolicy, safeguards);
  }

  public IdempotencyConfig config() {
    return config;
  }

  /**
   * Creates the attempt-token sequence, the keys table, its expiry index and its partial index of
   * in-progress keys if they are missing (the DDL is in the README); on a table made by an earlier
   * version it adds the partial index. A schema-qualified table needs its schema to exist.
   *
   * @throws dev.nolock.patterns.SchemaMismatchException when the table exists in a shape the
   *     library cannot use: a column it reads or writes missing or of another type (a {@code
   *     timestamp} without time zone: sessions in different time zones would read leases hours
   *     apart), a nullable column {@code NOT NULL}, or no primary key on {@code (scope, principal,
   *     idempotency_key)} (a table of the shape before callers; the README has the migration); its
   *     message holds the DDL that fits, and nothing is altered
   * @throws IllegalStateException when PostgreSQL refuses the DDL, e.g. for lack of the CREATE
   *     privilege
   * @throws BackendUnavailableException when PostgreSQL cannot be reached or times out
   */
  public void createTableIfMissing() {
    executor.createTableIfMissing();
  }

  /**
   * Runs {@code action} once for the key, or answers from what an earlier request with the key did.
   * The action's local database effects go through {@link Attempt#dsl()} and commit together with
   * its stored result.
   *
   * @param scope the operation the key belongs to (also the metrics tag), e.g. {@code
   *     "payments.create"}; keys are unique per scope and caller
   * @param caller who sent the request: {@link Caller#of} the authenticated principal, or {@link
   *     Caller#anonymous()} (a key space shared by everyone unauthenticated)
   * @param key the client's idempotency key; see {@link #requireValidKey}
   * @param fingerprint what identifies the request (see {@link Fingerprint})
   * @throws InvalidIdempotencyKeyException when the key is missing or malformed (HTTP 400)
   * @throws IllegalArgumentException for a malformed scope, or one starting with {@code '_'}
   * @throws NullPointerException for a null caller
   * @throws BackendUnavailableException when PostgreSQL cannot be reached, times out or aborts the
   *     transaction; retry later with the same key
   * @throws IllegalStateException when PostgreSQL refuses a statement for a reason a retry would
   *     repeat (the table does not match, a privilege is missing)
   * @throws X the action's own exception, checked or not, the same instance, when the {@link
   *     FailurePolicy} made it retryable; its transaction was rolled back and the key released. A
   *     {@code DataAccessException} the action's own statements raised is such an exception, not a
   *     {@link BackendUnavailableException}
   */
  public <X extends Exception> Outcome<R> execute(
      String scope,
      Caller caller,
      String key,
      Fingerprint fingerprint,
      IdempotentAction<R, X> action)
      throws X {
    Objects.requireNonNull(action, "action");
    return execute(scope, caller, key, fingerprint, Phases.single(action));
  }

  /**
   * Runs the operation's phases for the key, each in its own transaction with the key's recovery
   * point, starting after the last phase an earlier attempt committed; or answers from what an
   * earlier request did. Parameters and exceptions as for {@link #execute(String, Caller, String,
   * Fingerprint, IdempotentAction)}; additionally {@link IllegalStateException} when the key's
   * recovery point names no phase of {@code phases} (phases renamed while the key was in progress).
   * A phase's exception that the {@link FailurePolicy} made retryable, {@code X} or unchecked,
   * leaves the key at the recovery point of the last phase that committed.
   */
  public <X extends Exception> Outcome<R> execute(
      String scope, Caller caller, String key, Fingerprint fingerprint, Phases<R, X> phases)
      throws X {
    requireValidScope(scope);
    requireCaller(caller);
    requireValidKey(key);
    Objects.requireNonNull(fingerprint, "fingerprint");
    Objects.requireNonNull(phases, "phases");
    return executor.execute(scope, caller, key, fingerprint, phases);
  }

  /**
   * Deletes the keys whose retention has passed, in transactions of {@link
   * IdempotencyConfig#purgeBatchSize()} rows, until a batch finds fewer; rows locked by another
   * transaction are skipped. Run it from a scheduler; several processes may run it at once.
   *
   * <p>What it deletes: completed keys whose retention (counted from completion) has passed, and
   * in-progress keys still at {@value Phases#STARTED} (nothing of theirs committed) whose lease has
   * ended and whose retention (counted from their last claim or takeover) has passed. It never
   * deletes a key whose lease still runs, nor an in-progress key past {@value Phases#STARTED}: a
   * phase of it committed (a card was charged), and a later request with the key must resume after
   * that phase, not start over. Such a key stays until it completes or an operator {@linkplain
   * #forget forgets} it; the gauge {@code nolock.idempotency.abandoned.keys} counts those whose
   * retention has passed, and {@link #abandonedKeys(int)} lists them.
   *
   * @return how many keys were deleted
   * @throws BackendUnavailableException when PostgreSQL fails; the batches before stay deleted
   */
  public int purgeExpired() {
    return executor.purgeExpired();
  }

  /**
   * The first page of the {@link AbandonedKey abandoned keys}: at most {@code limit}, in {@code
   * (scope, principal, key)} order. Pass the last one to {@link #abandonedKeys(AbandonedKey, int)}
   * for the next page; a page shorter than {@code limit} is the last.
   *
   * @param limit 1 to {@value #MAX_PAGE_SIZE}
   * @throws IllegalArgumentException for a limit out of range
   * @throws BackendUnavailableException when PostgreSQL fails; nothing changed, retry
   */
  public List<AbandonedKey> abandonedKeys(int limit) {
    return page(null, null, null, limit);
  }

  /**
   * The page of abandoned keys that follows {@code after} (the last key of the previous page), at
   * most {@code limit}, in {@code (scope, principal, key)} order. Keys that stop being abandoned
   * between pages (completed, forgotten, taken over) drop out; none is returned twice.
   *
   * @param limit 1 to {@value #MAX_PAGE_SIZE}
   * @throws IllegalArgumentException for a limit out of range
   * @throws BackendUnavailableException when PostgreSQL fails; nothing changed, retry
   */
  public List<AbandonedKey> abandonedKeys(AbandonedKey after, int limit) {
    Objects.requireNonNull(after, "after: use abandonedKeys(limit) for the first page");
    return page(after.scope(), after.caller().principal(), after.key(), limit);
  }

  private List<AbandonedKey> page(
      String afterScope, String afterPrincipal, String afterKey, int limit) {
    if (limit < 1 || limit > MAX_PAGE_SIZE) {
      throw new IllegalArgumentException(
          "A page of abandoned keys holds 1 to "
              + MAX_PAGE_SIZE
              + " keys, got "
              + limit
              + ": page through them with abandonedKeys(lastKeyOfThePage, limit).");
    }
    return executor.listAbandoned(afterScope, afterPrincipal, afterKey, limit).stream()
        .map(
            r ->
                new AbandonedKey(
                    r.scope(),
                    r.principal().isEmpty() ? Caller.anonymous() : Caller.of(r.principal()),
                    r.key(),
                    r.recoveryPoint(),
                    r.attempts(),
                    r.createdAt(),
                    r.retentionEndedAt()))
        .toList();
  }

  /**
   * Forgets an unfinished key: an operator's call for a key nobody will come back for (usually an
   * {@link AbandonedKey}), once its committed phases have been reconciled.
   *
   * <p>What forgetting means: the key's row is deleted, with its fingerprint and recovery point.
   * Nothing is undone: the phases that committed stay committed (the local rows they wrote, the
   * charge they made). The key becomes unknown, so the next request with it is a <b>new request</b>
   * that runs every phase from the first: its committed phases run again (a second charge, unless
   * the provider still deduplicates {@link Attempt#idempotencyKeyForDownstream()}). Forget a key
   * only when you have reconciled what its phases did (refunded the charge, or completed the
   * operation by hand) and accept that a retry starts over. An attempt of the key that was paused
   * past its lease and commits a phase afterwards gets {@link Outcome.StaleAttempt}, its phase
   * rolled back.
   *
   * <p>Only an in-progress key whose lease has ended is forgotten; a completed key is left to
   * {@link #purgeExpired()}, a held key to the attempt holding it. Another caller's key with the
   * same scope and key is never touched. One statement: {@code DELETE ... WHERE scope = :scope AND
   * principal = :principal AND idempotency_key = :key AND state = 'in_progress' AND locked_until <=
   * clock_timestamp()}.
   *
   * @return true when this call deleted the key; false when there is no such unfinished, unheld
   *     key: it does not exist (never used, purged, or already forgotten, also by an earlier send
   *     of this call whose answer was lost), it completed, or an attempt holds its lease
   * @throws InvalidIdempotencyKeyException when the key is malformed
   * @throws IllegalArgumentException for a malformed scope, or one starting with {@code '_'}
   * @throws NullPointerException for a null caller (an {@link AbandonedKey} carries its caller)
   * @throws BackendUnavailableException when PostgreSQL fails: whether the key was forgotten is
   *     unknown; call again (false then says it is gone, completed or held) or list to see
   */
  public boolean forget(String scope, Caller caller, String key) {
    requireValidScope(scope);
    requireCaller(caller);
    requireValidKey(key);
    return executor.forget(scope, caller, key);
  }

  private static void requireCaller(Caller caller) {
    Objects.requireNonNull(
        caller,
        "caller is null: pass Caller.of(principal) for an authenticated caller, or"
            + " Caller.anonymous() for unauthenticated use (a key space shared by every"
            + " unauthenticated caller).");
  }

  /**
   * Checks an idempotency key: 1 to {@value #MAX_KEY_LENGTH} characters, each visible ASCII ({@code
   * !} to {@code ~}): no spaces, control characters or non-ASCII. The draft carries the key as a
   * Structured Field string, which allows spaces; they are refused here because a key with a space
   * is almost always a formatting mistake, and every sensible key (a UUID, a ULID, base64url)
   * passes.
   *
   * @return {@code key}
   * @throws InvalidIdempotencyKeyException naming the broken rule, without echoing the key
   */
  public static String requireValidKey(String key) {
    if (key == null || key.isEmpty()) {
      throw new InvalidIdempotencyKeyException(
          "The idempotency key is missing: send a unique key per request, e.g. a UUID.");
    }
    if (key.length() > MAX_KEY_LENGTH) {
      throw new InvalidIdempotencyKeyException(
          "The idempotency key is "
              + key.length()
              + " characters long, more than "
              + MAX_KEY_LENGTH
              + ": use a UUID.");
    }
    for (int i = 0; i < key.length(); i++) {
      char c = key.charAt(i);
      if (c < 0x21 || c > 0x7e) {
        throw new InvalidIdempotencyKeyException(
            "The idempotency key has a character at index "
                + i
                + " that is not visible ASCII (! to ~; no spaces or control characters): use a"
                + " UUID.");
      }
    }
    return key;
  }

  /**
   * Checks a scope: the rules of every name ({@link Names#requireName}, at most {@value
   * #MAX_SCOPE_LENGTH} characters), and no leading {@code '_'}, which is reserved for nolock's own
   * values of the scope tag ({@code _overflow}), so that no scope's counters can be mistaken for
   * them.
   *
   * @return {@code scope}
   * @throws IllegalArgumentException naming the broken rule and how to fix the call
   */
  public static String requireValidScope(String scope) {
    Names.requireName("scope", scope, MAX_SCOPE_LENGTH);
    if (scope.startsWith("_")) {
      throw new IllegalArgumentException(
          "The scope \""
              + scope
              + "\" starts with '_': scopes starting with '_' are reserved for nolock's own tags"
              + " (the metrics' overflow series). Name the operation, e.g. \"payments.create\".");
    }
    return scope;
  }

  @Override
  public String toString() {
    return "IdempotencyKeys[" + config + "]";
  }
}
