package dev.nolock.lock.postgres;

import dev.nolock.lock.postgres.internal.PgFunctions;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.SqlWork;
import dev.nolock.patterns.sql.WorkThrew;
import io.vavr.control.Option;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.exception.DataAccessException;

/**
 * Mutual exclusion for a critical section that fits in <b>one database transaction</b>: a
 * PostgreSQL transaction-level advisory lock, taken without waiting and released by the commit or
 * rollback that ends the work.
 *
 * <p>Guarantee: while one transaction runs {@code work} for a key, no other transaction on the same
 * database runs work for that key in the same namespace through this class (nor holds that
 * namespace's lock on it). Because the lock and the work share the transaction, there is no lease
 * and no pause window: if the holder stalls, its lock lasts exactly as long as its writes can still
 * commit. No fencing token is needed, and none is offered.
 *
 * <p>Algorithm of {@link #tryInTransaction}:
 *
 * <ol>
 *   <li>Begin a transaction (a savepoint if {@code dsl} is already in one; the lock then lasts
 *       until the <em>outer</em> transaction ends).
 *   <li>{@code SELECT pg_try_advisory_xact_lock(hashtextextended('nolock.lock:' || :key, 0))}, the
 *       whole input bound (another namespace's prefix, or none, when one is given: see below).
 *   <li>False: another transaction holds it; return {@link Option#none()} without running the work
 *       (the empty transaction ends with nothing written).
 *   <li>True: run the work on the same transaction and commit; the commit (or the rollback when the
 *       work throws) releases the lock. What the work throws, a checked exception too, is rethrown
 *       unchanged after that rollback.
 * </ol>
 *
 * <p>Namespace: PostgreSQL has one advisory-lock space per database, so the key is hashed with
 * nolock's namespace in front ({@link AdvisoryLockNamespace#LOCK}, {@code "nolock.lock:"}): an
 * application's own {@code pg_advisory_xact_lock(hashtextextended('invoice-42', 0))}, or another
 * nolock component's lock, is not this class's key {@code "invoice-42"}. To exclude existing code
 * that locks another framing of the same names, pass its namespace ({@link
 * AdvisoryLockNamespace#of}, {@code "billing"} for {@code hashtextextended('billing:' || name, 0)})
 * or {@link AdvisoryLockNamespace#unnamespaced()} for the bare name; only callers that use the same
 * namespace exclude each other.
 *
 * <p>Changing the key: a transaction on one namespace and one on another (or on none) do not
 * exclude each other; both get {@code Some} for the same key and both run the work. Earlier
 * versions of {@link #tryInTransaction(DSLContext, String, SqlWork)} locked the bare {@code
 * hashtextextended(key, 0)}, the same signature with another key. Switching namespace in either
 * direction (upgrading from such a version, or moving between {@link
 * AdvisoryLockNamespace#unnamespaced()}, the default and an application's namespace) therefore
 * needs every process on the old key stopped before the first on the new key starts: no rolling
 * deploy across a key change.
 *
 * <p>Hash collisions: keys are hashed to 64 bits, so two different keys can map to the same lock.
 * That costs efficiency only (the two keys exclude each other now and then), never safety.
 *
 * <p>PgBouncer: a transaction-level lock lives and dies with the transaction, which transaction
 * pooling keeps on one server connection, so this works behind PgBouncer in transaction mode.
 * Session-level {@code pg_advisory_lock} is deliberately not offered: behind transaction pooling
 * the session belongs to PgBouncer's server connection, not to the client, so two clients that are
 * handed the same server connection can both "hold" it, the unlock can run on another server
 * connection (or come from the wrong client), and a client that disconnects leaves the lock held by
 * a pooled connection, indefinitely.
 *
 * <p>Do not use it for a critical section that calls other systems (an HTTP call, a message send):
 * the lock ends with the transaction but those side effects do not roll back. Use {@link
 * dev.nolock.lock.FencedLock} with a fence, or a design without a lock, for those.
 */
public final class PostgresAdvisoryLock {

  /** Longest key accepted. */
  public static final int MAX_KEY_LENGTH = Lease.MAX_NAME_LENGTH;

  private PostgresAdvisoryLock() {}

  /**
   * Runs {@code work} in a transaction that holds the advisory lock on {@code key} in nolock's
   * namespace ({@link AdvisoryLockNamespace#LOCK}), or does nothing when another transaction holds
   * it: {@link #tryInTransaction(DSLContext, AdvisoryLockNamespace, String, SqlWork)} with that
   * namespace.
   *
   * @param dsl a PostgreSQL {@code DSLContext} (dialect {@code POSTGRES}) over a pool, or already
   *     in a transaction (see the class notes)
   * @param key what is locked, e.g. {@code "invoice-42"}: not blank, at most {@value
   *     #MAX_KEY_LENGTH} characters, no control characters
   * @param work the critical section; it must do its writes on the context it is given
   * @return the work's result (which may be null), or none when the key is held
   * @throws IllegalArgumentException for a null argument or a bad key, with how to fix it (also,
   *     with {@link AdvisoryLockNamespace#unnamespaced()}, for a key framed like nolock's own,
   *     {@code "nolock...:..."})
   * @throws BackendUnavailableException when the transaction could not start, the lock could not be
   *     asked for, or the commit failed (then nothing is known about whether the work took effect):
   *     retry later
   * @throws X whatever {@code work} throws, checked or not, unchanged, after the rollback
   */
  public static <T, X extends Exception> Option<T> tryInTransaction(
      DSLContext dsl, String key, SqlWork<? extends T, X> work) throws X {
    return tryInTransaction(dsl, AdvisoryLockNamespace.LOCK, key, work);
  }

  /**
   * Runs {@code work} in a transaction that holds the advisory lock on {@code key} in {@code
   * namespace}, or does nothing when another transaction holds it. Only callers that pass the same
   * namespace (and key) exclude each other.
   *
   * @param namespace {@link AdvisoryLockNamespace#LOCK} (what {@link #tryInTransaction(DSLContext,
   *     String, SqlWork)} uses), an application's {@link AdvisoryLockNamespace#of}, or {@link
   *     AdvisoryLockNamespace#unnamespaced()} to exclude code that locks {@code
   *     hashtextextended(key, 0)}
   * @see #tryInTransaction(DSLContext, String, SqlWork) the other parameters, the result and the
   *     exceptions
   */
  public static <T, X extends Exception> Option<T> tryInTransaction(
      DSLContext dsl, AdvisoryLockNamespace namespace, String key, SqlWork<? extends T, X> work)
      throws X {
    if (dsl == null) {
      throw new IllegalArgumentException(
          "dsl is null: pass a PostgreSQL DSLContext over your pool, e.g."
              + " DSL.using(dataSource, SQLDialect.POSTGRES), or the context of your transaction.");
    }
    if (namespace == null) {
      throw new IllegalArgumentException(
          "The advisory-lock namespace is null: pass AdvisoryLockNamespace.LOCK (nolock's),"
              + " AdvisoryLockNamespace.of(\"yours\") or AdvisoryLockNamespace.unnamespaced().");
    }
    Names.requireName("advisory lock key", key, MAX_KEY_LENGTH);
    if (work == null) {
      throw new IllegalArgumentException(
          "work is null: pass the critical section to run under the lock, e.g. tx ->"
              + " tx.update(INVOICES)...execute().");
    }
    // Built before the transaction: a name the namespace refuses never opens one.
    Field<Boolean> tryLock = PgFunctions.tryAdvisoryXactLock(namespace, key);
    try {
      return dsl.transactionResult(
          configuration -> {
            DSLContext tx = configuration.dsl();
            boolean locked = tx.select(tryLock).fetchSingle().value1();
            if (!locked) {
              return Option.none();
            }
            return Option.<T>some(WorkThrew.call(work, tx));
          });
    } catch (WorkThrew e) {
      throw e.<X>original();
    } catch (DataAccessException e) {
      throw new BackendUnavailableException(
          "PostgreSQL failed around the advisory lock on \""
              + key
              + "\" (starting the"
              + " transaction, taking the lock or committing the work): "
              + SqlErrors.serverMessage(e)
              + ". Nothing is known about whether the work took effect; retry later with backoff.",
          e);
    }
  }
}
