package dev.nolock.cas;

import dev.nolock.cas.internal.StoreErrors;
import dev.nolock.cas.internal.StoreErrors.Sent;
import dev.nolock.cas.internal.StoreMetrics;
import dev.nolock.cas.internal.VersionTable;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlErrors;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;
import java.util.random.RandomGenerator;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * A {@link VersionedStore} on <b>your own PostgreSQL table</b>: compare-and-swap on a {@code
 * bigint} version column, through jOOQ, without a lock (but for the turn of an {@link #update} that
 * keeps losing, step 4 below).
 *
 * <p>Guarantee: a write that names version {@code v} commits only if the row is still at {@code v},
 * and every committed change adds one to the version; of two writers that read the same version,
 * exactly one succeeds, so no update is lost. Losing is a {@link Conflict} value carrying the
 * version the row holds now (none when the row does not exist). An insert starts the row at a
 * version drawn at random from {@code [2^32, 2^62)}, not at 1, so a key deleted and inserted again
 * does not pass through its old versions, and a writer holding one of them is refused (the ABA
 * hazard): two lives of a key with {@code n} changes between them share a version with probability
 * about {@code n / 2^62}. This holds only for writes that go through the version check: any other
 * statement on the table (your own {@code UPDATE ... SET value = ...}) can still overwrite a row
 * without it.
 *
 * <p>The table needs a key column that is <b>unique</b> (a primary key or a unique index on it
 * alone), a {@code bigint NOT NULL} version column and a value column; names and types are
 * configuration ({@link VersionColumnStoreConfig}). Every statement is built with jOOQ's typed DSL
 * from validated identifiers, and every value is bound.
 *
 * <p>Algorithm, each step one statement:
 *
 * <ol>
 *   <li>{@link #insert}: {@code INSERT INTO t (key, version, value) VALUES (:id, :first, :value) ON
 *       CONFLICT (key) DO NOTHING RETURNING version}, {@code :first} drawn at random. No row back:
 *       the key exists; read its version for the conflict.
 *   <li>{@link #compareAndSet}: {@code UPDATE t SET value = :value, version = version + 1 WHERE key
 *       = :id AND version = :expected RETURNING version}. One row: the new version. None: read the
 *       current version (or its absence) for the conflict. More than one: the key is not unique, an
 *       {@link IllegalStateException}.
 *   <li>{@link #delete}: {@code DELETE ... WHERE key = :id AND version = :expected}, the same way.
 *   <li>{@link #update}: read, apply the change, compare-and-set; on a conflict, back off and
 *       repeat under the configured {@link RetryPolicy}. An update that has lost races for {@link
 *       VersionColumnStoreConfig#takeTurnAfter()} (20 ms by default) makes each next attempt a
 *       turn: {@code SELECT ... FOR NO KEY UPDATE} in a transaction of its own, the change, the
 *       same compare-and-set, the commit. It waits in PostgreSQL's queue for the row instead of
 *       racing writers that keep winning, so no writer loses for seconds on a hot row.
 * </ol>
 *
 * <p>Under PostgreSQL's default READ COMMITTED, a compare-and-set that finds the row locked by
 * another writer waits for it, then re-checks the version on the committed row: so the loser sees 0
 * rows, never a lost update.
 *
 * <p><b>Two ways to run.</b> A store made by {@link #create} owns its transactions, and its {@code
 * update} retries. Each single-row write is one statement in autocommit on a connection from your
 * pool, so the row lock is held only while the server runs it, not for a further client round trip
 * (on a hot row that is what bounds the rate); on a pool with autocommit off, the store commits
 * explicitly. A batch is one transaction. {@link #inTransaction(DSLContext)} gives a view that runs
 * inside <em>your</em> transaction and never retries (see there).
 *
 * <p>Isolation: designed for READ COMMITTED. If your pool runs REPEATABLE READ or SERIALIZABLE, a
 * single-row write of the store's own that meets a concurrent change fails with a serialization
 * failure; the store reports it as the conflict it is (so {@code update} retries it). A batch that
 * meets one fails as a whole with a {@link BackendUnavailableException}, nothing written. In your
 * own transaction neither can be a value: see {@link #inTransaction(DSLContext)}.
 *
 * <p>Failures of the pool, the driver or the server become {@link BackendUnavailableException}s; a
 * table or column that does not exist, or column types that do not fit the configuration, an {@link
 * IllegalStateException} naming the table and the DDL that fits. Immutable and thread-safe.
 *
 * <p><b>After a lost answer</b> (the connection dropped or timed out after a write or a {@code
 * COMMIT} was sent), PostgreSQL may have applied the write. The store then throws a {@link
 * BackendUnavailableException} meaning "outcome unknown", whose message says what to do; it never
 * turns the failure into a conflict or a success, and nothing retries it: {@code update} retries
 * only lost races and turns that certainly wrote nothing (see {@link #update}), so its change is
 * applied at most once per call. The version cannot tell this call's write from another writer's
 * (both write {@code v + 1}), so read the key back before writing it again: sent again, a write
 * that did land comes back as a conflict.
 *
 * @param <K> the key type
 * @param <T> the value type
 */
public final class VersionColumnStore<K, T> implements VersionedStore<K, T> {

  /** Most rows in one {@link #compareAndSetAll} call; split larger batches. */
  public static final int MAX_BATCH_SIZE = 1_000;

  private final VersionColumnStoreConfig<K, T> config;
  private final VersionTable<K, T, ?> table;
  private final StoreMetrics metrics;
  private final DSLContext dsl;
  private final boolean ownsTransactions;

  private VersionColumnStore(
      VersionColumnStoreConfig<K, T> config,
      VersionTable<K, T, ?> table,
      StoreMetrics metrics,
      DSLContext dsl,
      boolean ownsTransactions) {
    this.config = config;
    this.table = table;
    this.metrics = metrics;
    this.dsl = dsl;
    this.ownsTransactions = ownsTransactions;
  }

  /**
   * A store on the pool {@code dataSource} (HikariCP or similar) that owns its transactions: each
   * single-row write is one statement in autocommit (committed explicitly when the pool's
   * connections have autocommit off), a batch is one transaction, and {@code update} retries.
   */
  public static <K, T> VersionColumnStore<K, T> create(
      DataSource dataSource, VersionColumnStoreConfig<K, T> config) {
    Objects.requireNonNull(dataSource, "dataSource");
    Objects.requireNonNull(config, "config");
    return new VersionColumnStore<>(
        config,
        VersionTable.of(config),
        StoreMetrics.of(config.registry(), config.instanceName().getOrNull()),
        DSL.using(dataSource, SQLDialect.POSTGRES),
        true);
  }

  /**
   * The same store, working inside <b>your</b> transaction: every statement runs on {@code
   * transaction} and commits or rolls back with it; nothing is committed by the store.
   *
   * <p>Its {@link #update} makes <b>one</b> attempt and returns a conflict at once, whatever the
   * configured {@link RetryPolicy}. Retrying inside a transaction cannot help and can hurt: under
   * REPEATABLE READ or SERIALIZABLE the re-read sees the same snapshot, so every retry would lose
   * again; and a serialization failure has already aborted your transaction, so no later statement
   * in it can succeed. Under READ COMMITTED a retry could succeed, but your earlier statements were
   * based on the state you read before, which is now stale. The decision belongs to you: roll back
   * and run the whole transaction again (re-reading everything), or commit without this change.
   * Your earlier writes stay in your transaction either way.
   *
   * <p>Under READ COMMITTED a lost race is a {@link Conflict} value as usual. Under REPEATABLE READ
   * or SERIALIZABLE, PostgreSQL reports a row changed after your snapshot as a serialization
   * failure instead: it aborts your transaction and reaches you as a {@link
   * BackendUnavailableException} (SQLSTATE 40001 in its cause); roll back and retry.
   *
   * <p>Each call checks that the connection is not in autocommit mode. A context over a pool with
   * autocommit off is not in a transaction either, and cannot be told apart: pass the context of
   * your transaction ({@code configuration.dsl()} inside {@code dsl.transaction(...)}, or your
   * framework's transaction-bound context). Use the view only while that transaction runs.
   *
   * @param transaction a jOOQ context bound to one connection in a running transaction
   */
  public VersionColumnStore<K, T> inTransaction(DSLContext transaction) {
    Objects.requireNonNull(transaction, "transaction");
    return new VersionColumnStore<>(config, table, metrics, transaction, false);
  }

  public VersionColumnStoreConfig<K, T> config() {
    return config;
  }

  /**
   * {@inheritDoc}
   *
   * @throws IllegalArgumentException for a null id or one of another type than the key type
   * @throws IllegalStateException when the table or a column does not exist (the message names the
   *     table and the DDL it expects)
   * @throws BackendUnavailableException when PostgreSQL cannot be reached or fails
   */
  @Override
  public Option<Versioned<T>> read(K id) {
    requireId(id);
    return translate("read of key " + id, Sent.READ, () -> run(tx -> table.read(tx, id)));
  }

  /**
   * Inserts {@code value} at a version drawn at random from {@code [2^32, 2^62)} if the key does
   * not exist; a {@link Conflict} with the existing version otherwise (with no version, in the rare
   * case that the row was deleted between the refused insert and the read that followed it).
   *
   * @throws BackendUnavailableException when PostgreSQL fails or the answer is lost: whether the
   *     row was inserted is unknown; an insert sent again is then a conflict if it was
   */
  @Override
  public Either<Conflict, Versioned<T>> insert(K id, T value) {
    requireId(id);
    requireValue(value, "value");
    return conditionalWrite(
        "insert of key " + id,
        Sent.WRITE,
        id,
        tx ->
            table
                .insert(tx, id, value)
                .map(version -> new Versioned<>(value, version))
                .toEither(() -> conflict(tx, id)));
  }

  /**
   * {@inheritDoc}
   *
   * @return the new value and version, or the conflict with the version the row holds now (none
   *     when it does not exist)
   * @throws IllegalArgumentException for a null or foreign id, value or version (a version not made
   *     by a version column store)
   * @throws IllegalStateException when the key matched several rows (the key column is not unique):
   *     a broken table, see the message
   */
  @Override
  public Either<Conflict, Versioned<T>> compareAndSet(K id, Version expected, T newValue) {
    requireId(id);
    long expectedVersion = requireVersion(expected);
    requireValue(newValue, "new value");
    return compareAndSet(id, expectedVersion, newValue, "compare-and-set of key " + id, Sent.WRITE);
  }

  private Either<Conflict, Versioned<T>> compareAndSet(
      K id, long expected, T newValue, String doing, Sent sent) {
    return conditionalWrite(
        doing,
        sent,
        id,
        tx ->
            table
                .compareAndSet(tx, id, expected, newValue)
                .map(version -> new Versioned<>(newValue, version))
                .toEither(() -> conflict(tx, id)));
  }

  /** {@inheritDoc} Returns the deleted version. */
  @Override
  public Either<Conflict, Version> delete(K id, Version expected) {
    requireId(id);
    long expectedVersion = requireVersion(expected);
    return conditionalWrite(
        "delete of key " + id,
        Sent.WRITE,
        id,
        tx ->
            table.delete(tx, id, expectedVersion)
                ? Either.right(expected)
                : Either.left(conflict(tx, id)));
  }

  /**
   * Read, apply {@code change}, compare-and-set. A store from {@link #create} repeats this on a
   * conflict, with jittered backoff on the configured clock, until the {@link RetryPolicy} gives
   * up, and then returns the last conflict. A view from {@link #inTransaction(DSLContext)} makes
   * one attempt and returns the conflict at once (see there for why).
   *
   * <p>{@code change} must be a pure function of the value: it may run several times, and only its
   * last result is stored. A missing key is a conflict with no version, returned at once without
   * calling {@code change}; so is a row deleted between the read and the write.
   *
   * <p>A store from {@link #create} that has lost races on the row for {@link
   * VersionColumnStoreConfig#takeTurnAfter()} takes its turn: each next attempt locks the row while
   * it reads, applies {@code change} and writes (see {@link
   * VersionColumnStoreConfig.Builder#takeTurnAfter}), so {@code change} then runs while the other
   * writers of the row wait: keep it quick. A turn idle for longer than {@link
   * VersionColumnStoreConfig#TURN_IDLE_LIMIT} is ended by PostgreSQL with nothing written, and the
   * update races on without turns, as after a turn that lost its connection before its COMMIT; an
   * update whose {@code change} has taken half that limit takes no turn.
   *
   * <p>Only lost races are retried. When PostgreSQL fails or the answer to the compare-and-set is
   * lost, the call ends with a {@link BackendUnavailableException}: the change was applied once or
   * not at all (its message says which is known). Read the key before calling {@code update} again,
   * which would apply it again.
   *
   * @throws IllegalArgumentException when {@code change} returns null
   * @throws RuntimeException whatever {@code change} throws, unchanged (nothing is written)
   */
  @Override
  public Either<Conflict, Versioned<T>> update(K id, UnaryOperator<T> change) {
    requireId(id);
    if (change == null) {
      throw new IllegalArgumentException(
          "The change function is null: pass the function from the current value to the new"
              + " one, e.g. balance -> balance + 10.");
    }
    if (!ownsTransactions) {
      return attemptUpdate(id, change, new Turns()).fold(Either::left, Function.identity());
    }
    return retryUpdate(id, change);
  }

  /**
   * {@link #update}'s retries, by the configured {@link RetryPolicy} with one addition, the turn:
   *
   * <ol>
   *   <li>Attempt: read, apply the change, compare-and-set. Done, or the row is gone: return.
   *   <li>Lost the race: give up after the policy's attempts, or when the backoff would pass its
   *       elapsed time; otherwise sleep the backoff, cut short at the moment the update may take
   *       its turn (the backoff spreads racers apart; a turn waits in the row's queue instead).
   *   <li>Once the update has lost for {@code takeTurnAfter}, each attempt is a turn ({@link
   *       #attemptTurn}); go to 2 on a loss (only a serialization failure or a trigger makes one).
   *       Not when a run of the change has taken half the turn's idle limit or more, nor after a
   *       turn of this call failed with nothing written (see {@link #attemptTurn}): the update
   *       races on, as without turns (the next turn would most likely fail too).
   * </ol>
   *
   * Written out rather than through {@link RetryPolicy#run} for the cut-short sleep: it is what
   * bounds the wait of a writer that keeps losing (a sleep drawn late in the backoff can be a
   * second long).
   */
  private Either<Conflict, Versioned<T>> retryUpdate(K id, UnaryOperator<T> change) {
    RetryPolicy policy = config.retryPolicy();
    LeaseClock clock = config.clock();
    long turnAfter = config.takeTurnAfter().map(Duration::toNanos).getOrElse(Long.MAX_VALUE);
    long maxElapsed = policy.maxElapsed().toNanos();
    RandomGenerator random = ThreadLocalRandom.current();
    long start = clock.nanoTime();
    Turns turns = new Turns();
    for (int failures = 0; ; ) {
      if (failures > 0) {
        metrics.retry();
      }
      long elapsed = clock.nanoTime() - start;
      Either<Conflict, Either<Conflict, Versioned<T>>> outcome =
          elapsed >= turnAfter && turns.allowed()
              ? attemptTurn(id, change, turns)
              : attemptUpdate(id, change, turns);
      if (outcome.isRight()) {
        return outcome.get();
      }
      failures++;
      long delay = policy.backoff(failures, random).toNanos();
      elapsed = clock.nanoTime() - start;
      // (a clock that stepped back makes elapsed negative: no cut then, nor without turns)
      if (turns.allowed() && elapsed >= 0 && elapsed < turnAfter && delay > turnAfter - elapsed) {
        delay = turnAfter - elapsed;
      }
      if (failures >= policy.maxAttempts() || elapsed + delay > maxElapsed) {
        metrics.gaveUp();
        return Either.left(outcome.getLeft());
      }
      try {
        clock.sleep(Duration.ofNanos(delay));
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        metrics.gaveUp();
        return Either.left(outcome.getLeft());
      }
    }
  }

  /**
   * Compare-and-set of many rows in one transaction, with the outcome <b>per row</b>: a row that is
   * not at its expected version is reported as a {@link Conflict} with its current version (or none
   * when it does not exist) and does not stop the others, which are written. Use it when the rows
   * are independent (a batch of counters, a page of edited records); when they must change together
   * or not at all, check that every outcome is a right value and roll back otherwise, with {@link
   * #inTransaction(DSLContext)} inside your transaction.
   *
   * <p>Three statements, whatever the batch size: (1) {@code SELECT key, version ... WHERE key IN
   * (:ids) ORDER BY key FOR UPDATE} reads the current versions and locks the rows in key order, so
   * concurrent batches over the same keys take their locks in the same order whatever the query
   * plan, and queue instead of deadlocking; (2) one {@code UPDATE t SET ... FROM (VALUES (:id,
   * :expected, :value), ...) ... WHERE t.key = v.id AND t.version = v.expected RETURNING key,
   * version} for the rows whose version matched; (3) the commit. The alternatives cost as much or
   * report less: jOOQ's JDBC batch sends one {@code UPDATE} per row and returns only row counts, so
   * the losers' current versions need a further read anyway, and with {@code UPDATE ... FROM
   * VALUES} alone the order in which rows are locked is up to the planner. Since the rows are
   * locked, each conflict carries the version the row held when the batch was decided.
   *
   * <p>Not retried, in either mode: re-read the conflicting rows and send them again.
   *
   * @param writes at most {@value #MAX_BATCH_SIZE} writes with distinct keys
   * @return one outcome per write, in the order of {@code writes}
   * @throws IllegalArgumentException for a null write, duplicate keys or too many writes
   * @throws BackendUnavailableException when PostgreSQL fails; nothing of the batch is committed
   *     (when the store owns the transaction), or whether it was is unknown (when the commit itself
   *     failed)
   */
  public List<Either<Conflict, Versioned<T>>> compareAndSetAll(List<VersionedWrite<K, T>> writes) {
    Set<K> ids = requireWrites(writes);
    if (writes.isEmpty()) {
      return List.of();
    }
    metrics.attempts(writes.size());
    List<Either<Conflict, Versioned<T>>> outcomes =
        translate(
            "batch compare-and-set of " + writes.size() + " rows",
            Sent.BATCH,
            () -> transactional(tx -> compareAndSetAll(tx, writes, ids)));
    metrics.conflicts((int) outcomes.stream().filter(Either::isLeft).count());
    return outcomes;
  }

  private List<Either<Conflict, Versioned<T>>> compareAndSetAll(
      DSLContext tx, List<VersionedWrite<K, T>> writes, Set<K> ids) {
    Map<K, Version> current = table.lockVersions(tx, ids);
    List<VersionedWrite<K, T>> matching = new ArrayList<>();
    for (VersionedWrite<K, T> write : writes) {
      if (write.expected().equals(current.get(write.id()))) {
        matching.add(write);
      }
    }
    Map<K, Version> written = matching.isEmpty() ? Map.of() : table.compareAndSetAll(tx, matching);
    if (written.size() != matching.size()) {
      throw new IllegalStateException(
          "The batch compare-and-set on table "
              + table.tableName()
              + " wrote "
              + written.size()
              + " of the "
              + matching.size()
              + " rows it had locked at their expected versions."
              + " Locked rows cannot change, so this is a bug in nolock or a trigger on the"
              + " table; nothing of the batch is committed by the store.");
    }
    List<Either<Conflict, Versioned<T>>> outcomes = new ArrayList<>(writes.size());
    for (VersionedWrite<K, T> write : writes) {
      Version version = written.get(write.id());
      outcomes.add(
          version != null
              ? Either.right(new Versioned<>(write.newValue(), version))
              : Either.left(
                  new Conflict(String.valueOf(write.id()), Option.of(current.get(write.id())))));
    }
    return outcomes;
  }

  /** What one {@code update} call has learnt about its turns. */
  private static final class Turns {
    /** A change that takes this long would leave a turn idle for most of its limit. */
    private static final long SLOW_CHANGE_NANOS =
        VersionColumnStoreConfig.TURN_IDLE_LIMIT.toNanos() / 2;

    private long slowestChangeNanos;
    private boolean ended;

    boolean allowed() {
      return !ended && slowestChangeNanos < SLOW_CHANGE_NANOS;
    }
  }

  private Either<Conflict, Either<Conflict, Versioned<T>>> attemptUpdate(
      K id, UnaryOperator<T> change, Turns turns) {
    String doing = "update of key " + id;
    Option<Versioned<T>> current =
        translate(doing + " (its read)", Sent.READ, () -> run(tx -> table.read(tx, id)));
    if (current.isEmpty()) {
      return Either.right(Either.left(new Conflict(String.valueOf(id), Option.none())));
    }
    T newValue = applyChange(change, current.get().value(), id, turns);
    Either<Conflict, Versioned<T>> written =
        compareAndSet(
            id,
            current.get().version().asLong(),
            newValue,
            doing + " (its compare-and-set)",
            Sent.UPDATE);
    if (written.isLeft() && !written.getLeft().isMissing()) {
      return Either.left(written.getLeft()); // lost a race: retry
    }
    return Either.right(written); // done, or the row is gone: retrying cannot help
  }

  /**
   * One attempt of {@link #update} in its turn, in a transaction of its own:
   *
   * <ol>
   *   <li>{@code SELECT ... FOR NO KEY UPDATE} waits in PostgreSQL's queue for the row's lock,
   *       reads it, and limits how long the transaction may then sit idle to {@link
   *       VersionColumnStoreConfig#TURN_IDLE_LIMIT} (PostgreSQL ends a session idle longer, which
   *       rolls the turn back and frees the row for the others).
   *   <li>Apply the change; compare-and-set as any attempt does (the lock makes it match, the check
   *       stays); commit.
   * </ol>
   *
   * A transient failure (a dropped connection, a timeout) before the COMMIT was sent leaves nothing
   * written: PostgreSQL rolls back a transaction that does not commit. So does PostgreSQL ending
   * the session for its idle limit (SQLSTATE 25P03), even when that is the answer to the COMMIT:
   * the server checks for the pending timeout before it executes the next command, so the COMMIT
   * never ran. Either is a lost race, after which the call takes no further turn. Any other failure
   * of the COMMIT leaves the outcome unknown; any other failure before it is reported with nothing
   * written. A serialization failure (REPEATABLE READ or SERIALIZABLE pools) is a lost race, as
   * elsewhere. The 25P03 rule trusts that the error comes from PostgreSQL itself: a connection
   * pooler between them that forwarded the COMMIT and then reported a 25P03 of its own would make
   * the change apply twice (PgBouncer reports its own idle timeout as 08P01).
   */
  private Either<Conflict, Either<Conflict, Versioned<T>>> attemptTurn(
      K id, UnaryOperator<T> change, Turns turns) {
    metrics.attempts(1);
    metrics.turn();
    boolean[] committing = {false};
    Either<Conflict, Either<Conflict, Versioned<T>>> outcome;
    try {
      outcome =
          dsl.transactionResult(
              configuration -> {
                DSLContext tx = configuration.dsl();
                Option<Versioned<T>> current =
                    table.readForTurn(tx, id, VersionColumnStoreConfig.TURN_IDLE_LIMIT);
                if (current.isEmpty()) {
                  // A row deleted and inserted again while this turn waited for its lock is
                  // skipped by the locking read, and the new one is not in its snapshot: only a
                  // fresh statement can tell a missing key from a race.
                  Conflict now = conflict(tx, id);
                  return now.isMissing() ? Either.right(Either.left(now)) : Either.left(now);
                }
                T newValue;
                try {
                  newValue = applyChange(change, current.get().value(), id, turns);
                } catch (RuntimeException e) {
                  throw new ChangeFailed(e);
                }
                Option<Version> written =
                    table.compareAndSet(tx, id, current.get().version().asLong(), newValue);
                Either<Conflict, Either<Conflict, Versioned<T>>> decided =
                    written.isDefined()
                        ? Either.right(Either.right(new Versioned<>(newValue, written.get())))
                        : Either.left(conflict(tx, id));
                committing[0] = true; // what fails from here on is the COMMIT
                return decided;
              });
    } catch (ChangeFailed e) {
      throw e.getCause(); // the change's own failure, unchanged, its turn rolled back
    } catch (DataAccessException e) {
      if (!committing[0] && StoreErrors.isSerializationFailure(e)) {
        outcome = Either.left(translate("update of key " + id, Sent.READ, () -> conflict(dsl, id)));
      } else if (StoreErrors.isIdleSessionEnded(e)
          || (!committing[0] && SqlErrors.classify(e) == SqlErrors.Kind.TRANSIENT)) {
        turns.ended = true;
        metrics.turnEnded();
        outcome = Either.left(translate("update of key " + id, Sent.READ, () -> conflict(dsl, id)));
      } else {
        throw StoreErrors.translate(
            e,
            table,
            "update of key " + id + " (its turn on the row)",
            committing[0] ? Sent.UPDATE : Sent.UNCOMMITTED);
      }
    }
    if (outcome.isLeft()) {
      metrics.conflicts(1);
    }
    return outcome;
  }

  /**
   * Carries what the change function threw out of a turn's transaction past the store's handling of
   * its own statements' failures, so that it reaches the caller unchanged.
   */
  private static final class ChangeFailed extends RuntimeException {
    private static final long serialVersionUID = 1L;

    ChangeFailed(RuntimeException cause) {
      super(cause);
    }

    @Override
    public synchronized RuntimeException getCause() {
      return (RuntimeException) super.getCause();
    }
  }

  private T applyChange(UnaryOperator<T> change, T value, K id, Turns turns) {
    long began = config.clock().nanoTime();
    T newValue = change.apply(value);
    turns.slowestChangeNanos =
        Math.max(turns.slowestChangeNanos, config.clock().nanoTime() - began);
    if (newValue == null) {
      throw new IllegalArgumentException(
          "The change function returned null for key "
              + id
              + ": return the new value (to remove the row, use delete).");
    }
    return newValue;
  }

  /**
   * One conditional write: counts the attempt, runs {@code work} and counts a conflict. Outside the
   * caller's transaction, a serialization failure (REPEATABLE READ or SERIALIZABLE pools) is a lost
   * race: the statement is rolled back and the row's version read afresh for the conflict.
   */
  private <R> Either<Conflict, R> conditionalWrite(
      String doing, Sent sent, K id, Function<DSLContext, Either<Conflict, R>> work) {
    metrics.attempts(1);
    Either<Conflict, R> outcome =
        translate(
            doing,
            sent,
            () -> {
              try {
                return ownsTransactions ? OwnTransaction.run(dsl, work) : onCallerTransaction(work);
              } catch (DataAccessException e) {
                if (!ownsTransactions || !StoreErrors.isSerializationFailure(e)) {
                  throw e;
                }
                return Either.left(conflict(dsl, id));
              }
            });
    if (outcome.isLeft()) {
      metrics.conflicts(1);
    }
    return outcome;
  }

  private Conflict conflict(DSLContext tx, K id) {
    return new Conflict(String.valueOf(id), table.currentVersion(tx, id));
  }

  /** Runs {@code work} without a transaction of the store's own (a read). */
  private <R> R run(Function<DSLContext, R> work) {
    return ownsTransactions ? work.apply(dsl) : onCallerTransaction(work);
  }

  /** Runs {@code work} in a transaction of the store's own, or in the caller's. */
  private <R> R transactional(Function<DSLContext, R> work) {
    return ownsTransactions
        ? dsl.transactionResult(configuration -> work.apply(configuration.dsl()))
        : onCallerTransaction(work);
  }

  private <R> R onCallerTransaction(Function<DSLContext, R> work) {
    return dsl.connectionResult(
        connection -> {
          if (connection.getAutoCommit()) {
            throw new IllegalArgumentException(
                "inTransaction(...) was given a DSLContext whose connection is in autocommit"
                    + " mode, so each statement would commit on its own. Pass the context of your"
                    + " running transaction (configuration.dsl() inside dsl.transaction(...)), or"
                    + " use the store itself, which runs its own transactions.");
          }
          return work.apply(dsl.configuration().derive(connection).dsl());
        });
  }

  /**
   * Runs {@code statement}, turning a jOOQ failure into what the caller must do; {@code sent} says
   * what the call had sent by then, which decides whether its outcome is unknown.
   */
  private <R> R translate(String doing, Sent sent, Supplier<R> statement) {
    try {
      return statement.get();
    } catch (DataAccessException e) {
      throw StoreErrors.translate(
          e, table, doing, ownsTransactions ? sent : Sent.CALLERS_TRANSACTION);
    }
  }

  private void requireId(K id) {
    if (id == null) {
      throw new IllegalArgumentException("The id is null: pass the key of the row.");
    }
    if (!config.keyType().isInstance(id)) {
      throw new IllegalArgumentException(
          "The id "
              + id
              + " is a "
              + id.getClass().getName()
              + ", but this store's keys are "
              + config.keyType().getName()
              + " (see VersionColumnStoreConfig.custom).");
    }
  }

  private static void requireValue(Object value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " is null: the store keeps non-null values; to remove a row, use delete.");
    }
  }

  private static long requireVersion(Version expected) {
    if (expected == null) {
      throw new IllegalArgumentException(
          "The expected version is null: pass the version returned by read(), insert() or"
              + " compareAndSet().");
    }
    try {
      return Long.parseLong(expected.value());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "The version \""
              + expected
              + "\" was not issued by a version column store (its versions are numbers): pass"
              + " the version returned by read(), insert() or compareAndSet() of this store.",
          e);
    }
  }

  private Set<K> requireWrites(List<VersionedWrite<K, T>> writes) {
    if (writes == null) {
      throw new IllegalArgumentException("The list of writes is null: pass a list, maybe empty.");
    }
    if (writes.size() > MAX_BATCH_SIZE) {
      throw new IllegalArgumentException(
          "A batch of "
              + writes.size()
              + " writes is more than "
              + MAX_BATCH_SIZE
              + ": split it into batches of at most "
              + MAX_BATCH_SIZE
              + ".");
    }
    Set<K> ids = new LinkedHashSet<>();
    Set<K> duplicates = new HashSet<>();
    for (VersionedWrite<K, T> write : writes) {
      if (write == null) {
        throw new IllegalArgumentException("The list of writes contains null: remove it.");
      }
      requireId(write.id());
      requireVersion(write.expected());
      if (!ids.add(write.id())) {
        duplicates.add(write.id());
      }
    }
    if (!duplicates.isEmpty()) {
      throw new IllegalArgumentException(
          "The batch writes the keys "
              + duplicates
              + " more than once: one write per key per batch, since only one of them could"
              + " match the version.");
    }
    return ids;
  }

  @Override
  public String toString() {
    return "VersionColumnStore["
        + config.table()
        + (ownsTransactions ? "" : ", in a transaction")
        + "]";
  }
}
