package dev.nolock.lock.postgres;

import dev.nolock.lock.postgres.internal.LockTable;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.sql.CreateIfMissing;
import dev.nolock.patterns.sql.NotificationListener;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.SqlNames;
import io.vavr.control.Option;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Name;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link LockBackend} on PostgreSQL: one row per lock name holding the owner, a fencing-token
 * counter and the expiry, all judged and changed by single statements on the database's clock. Use
 * it through {@link dev.nolock.lock.FencedLock}, which adds waiting, the renewal watchdog and
 * metrics.
 *
 * <p>Guarantee (the {@link LockBackend} contract, judged on the database server's clock): a lease
 * is granted only while the name's row is missing or expired; every grant of a name gets a token
 * one higher than the previous grant of that name, forever, because the row is never deleted;
 * renewal and release change the row only while it still carries the caller's owner and token and
 * has not expired. It does <em>not</em> promise a single holder: a holder paused past its lease
 * still believes it holds it, so writes it protects go through a {@link
 * dev.nolock.patterns.sql.Fence}.
 *
 * <p>Algorithm, one statement per call, each in its own short transaction (autocommit, or an
 * explicit commit when the pool hands out connections with autocommit off):
 *
 * <ol>
 *   <li>Acquire: {@code INSERT INTO t AS l (name, owner, token, expires_at) VALUES (:name, :owner,
 *       1, clock_timestamp() + :ttl) ON CONFLICT (name) DO UPDATE SET owner = excluded.owner, token
 *       = l.token + 1, expires_at = excluded.expires_at WHERE l.expires_at <= clock_timestamp()
 *       RETURNING token}. A first grant inserts token 1; a later one bumps the counter in the same
 *       row, under the row lock that {@code ON CONFLICT} takes, so concurrent acquirers are
 *       serialised and see each other's commits. No row returned: someone holds an unexpired lease,
 *       and the caller lost the race (a value, not an exception).
 *   <li>Renew: {@code UPDATE t SET expires_at = clock_timestamp() + :ttl WHERE name = :name AND
 *       owner = :owner AND token = :token AND expires_at > clock_timestamp()}: a compare-and-swap
 *       on the token, never a blind TTL bump. One row: renewed; none: the lease is lost.
 *   <li>Release: the same conditional {@code UPDATE} setting {@code expires_at =
 *       clock_timestamp()}: the lease ends now, the row and its token stay. A second or stale
 *       release (another owner, an older token, an expired lease) matches no row and changes
 *       nothing.
 * </ol>
 *
 * The TTL is bound as a number of milliseconds ({@code :millis * interval '1 millisecond'}),
 * rounded up, so the database never stores a shorter lease than the holder measures.
 *
 * <p>Why {@code clock_timestamp()}: {@code now()} and {@code current_timestamp} are frozen at the
 * start of the transaction, so a statement that waited on a row lock, or ran late in a long
 * transaction, would judge expiry at a moment already in the past and could take over a lease that
 * is still running. {@code clock_timestamp()} reads the clock when it is evaluated. Expiry is
 * decided by this one clock only; the holders' clocks never are compared with it.
 *
 * <p>Why the row is kept on release: the token counter lives in the row. Deleting it would restart
 * the next grant at token 1, below tokens the fence has already accepted, and that holder would be
 * refused everywhere (or, with a fresh fence, a stale holder accepted). One row per lock name ever
 * used is the price; delete rows only for names that will never be locked again.
 *
 * <p>A lock name or owner that is null, blank, longer than {@value Lease#MAX_NAME_LENGTH}
 * characters (the columns' width) or contains a control character is refused with an {@link
 * IllegalArgumentException} before anything is sent, as by the other backends.
 *
 * <p>Failures of the pool, the driver or the server (jOOQ's {@link DataAccessException}) go through
 * the shared {@link SqlErrors} policy: a connection, timeout or concurrency failure becomes a
 * {@link BackendUnavailableException} naming the lock and what to do; a refusal a retry would
 * repeat (a missing table or privilege) an {@link IllegalStateException}. Thread-safe. Its lease
 * calls hold nothing between calls; waiting acquires share one listener thread and one pool
 * connection ({@link #onRelease}), which {@link #close()} gives back.
 */
public final class PostgresLockBackend implements FairLockBackend, AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(PostgresLockBackend.class);
  private static final Duration LISTEN_POLL = Duration.ofSeconds(1);
  private static final Duration SELF_TEST_TIMEOUT = Duration.ofSeconds(2);
  private static final int IDLE_SECONDS = 10;
  private static final int RETRY_SECONDS = 60;
  private static final Duration RETRY = Duration.ofSeconds(RETRY_SECONDS);
  private static final long NEVER = Long.MIN_VALUE;
  private static final Duration IDLE = Duration.ofSeconds(IDLE_SECONDS);

  private final DataSource dataSource;
  private final DSLContext dsl;
  private final PostgresLockConfig config;
  private final Name tableName;
  private final LockTable table;
  private final int queryTimeoutSeconds;
  private final Map<String, Runnable> waiting = new ConcurrentHashMap<>();
  private NotificationListener listener; // guarded by this; started by the first wait
  private volatile NotificationListener.State listenState = NotificationListener.State.STARTING;
  private volatile long pollingSince = NEVER; // when the listener last found it could not listen
  private volatile long queueUnusableSince = NEVER; // when the queue's table last was refused
  private boolean closed; // guarded by this
  private long idleSince = System.nanoTime(); // guarded by this; when the last wait ended
  private int failedStarts; // guarded by this; listeners in a row that ended without listening

  private PostgresLockBackend(DataSource dataSource, PostgresLockConfig config) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.config = Objects.requireNonNull(config, "config");
    this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
    this.tableName = SqlNames.requireSqlIdentifier("lock table", config.table());
    this.table =
        new LockTable(
            tableName, SqlNames.requireSqlIdentifier("lock waiters table", config.waitersTable()));
    this.queryTimeoutSeconds = Math.toIntExact(config.queryTimeout().toSeconds());
  }

  /**
   * A backend on the pool {@code dataSource} with {@code config}. Give it a pool (HikariCP or
   * similar): every call borrows one connection for one statement.
   */
  public static PostgresLockBackend create(DataSource dataSource, PostgresLockConfig config) {
    return new PostgresLockBackend(dataSource, config);
  }

  /** A backend on {@code dataSource} with {@link PostgresLockConfig#ofDefaults()}. */
  public static PostgresLockBackend create(DataSource dataSource) {
    return create(dataSource, PostgresLockConfig.ofDefaults());
  }

  public PostgresLockConfig config() {
    return config;
  }

  /**
   * Creates the lease table if it does not exist: {@code (name varchar(255) primary key, owner
   * varchar(255) not null, token bigint not null check (token > 0), expires_at timestamptz not
   * null)}. A schema-qualified table needs its schema to exist. Backends that start at once may all
   * call it: one that loses the race to create the table finds the winner's ({@link
   * CreateIfMissing}).
   *
   * @throws IllegalStateException when PostgreSQL refuses the DDL, e.g. for lack of the CREATE
   *     privilege
   * @throws BackendUnavailableException when PostgreSQL cannot be reached or times out
   */
  public void createTableIfMissing() {
    translate(
        () -> "creating the lock table " + table + " (the user needs CREATE on its schema)",
        () -> {
          // Its own transaction (jOOQ's, committed) on a pool connection.
          CreateIfMissing.relation(
              dsl,
              tableName,
              config.queryTimeout(),
              on -> table.createTableIfMissing(on).execute());
          CreateIfMissing.relation(
              dsl,
              table.waitersName(),
              config.queryTimeout(),
              on -> table.createWaitersTableIfMissing(on).execute());
          queueUnusableSince = NEVER;
          return null;
        });
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    requireNameAndOwner(name, owner);
    Option<Long> token =
        translate(
            () ->
                "acquiring lock \""
                    + name
                    + "\" for "
                    + owner
                    + ". Whether it was granted is unknown; retry later with backoff (a grant that"
                    + " did happen expires after its TTL)",
            () -> acquireStatement(name, owner, ttl));
    return token.map(FencingToken::of);
  }

  private Option<Long> acquireStatement(String name, String owner, Duration ttl) {
    return OwnTransaction.run(
        dsl,
        tx ->
            Option.ofOptional(
                table
                    .tryAcquire(tx, name, owner, ttl)
                    .queryTimeout(queryTimeoutSeconds)
                    .fetchOptional()
                    .map(r -> r.get(0, Long.class))));
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    requireNameAndOwner(name, owner);
    int rows =
        translate(
            () ->
                "renewing lock \""
                    + name
                    + "\" (token "
                    + token.value()
                    + "). Treat the lease"
                    + " as ending at its deadline unless a later renewal succeeds",
            () ->
                OwnTransaction.run(
                    dsl,
                    tx ->
                        table
                            .renew(tx, name, owner, token.value(), ttl)
                            .queryTimeout(queryTimeoutSeconds)
                            .execute()));
    return oneRowAtMost(rows, name);
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    requireNameAndOwner(name, owner);
    int rows =
        translate(
            () ->
                "releasing lock \""
                    + name
                    + "\" (token "
                    + token.value()
                    + "). It may still be"
                    + " held; retry the release later or let it expire after its TTL",
            () ->
                orWithoutQueue(
                    () ->
                        OwnTransaction.run(
                            dsl,
                            tx ->
                                table
                                    .release(
                                        tx, name, owner, token.value(), PostgresLockConfig.CHANNEL)
                                    .queryTimeout(queryTimeoutSeconds)
                                    .fetch()
                                    .size()),
                    () ->
                        OwnTransaction.run(
                            dsl,
                            tx ->
                                table
                                    .releaseWithoutQueue(tx, name, owner, token.value())
                                    .queryTimeout(queryTimeoutSeconds)
                                    .execute())));
    return oneRowAtMost(rows, name);
  }

  /**
   * The fair acquire ({@link FairLockBackend}): one statement that grants only on the waiter's turn
   * and otherwise keeps its place in the queue table ({@link PostgresLockConfig#waitersTable()});
   * see {@code LockTable.tryAcquireInTurn} for its parts.
   */
  @Override
  public Option<FencingToken> tryAcquireInTurn(
      String name, String owner, Duration ttl, String waiter, Duration place, Duration patience) {
    requireNameAndOwner(name, owner);
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    Option<Long> token =
        translate(
            () ->
                "acquiring lock \""
                    + name
                    + "\" for "
                    + owner
                    + " in turn. Whether it was granted is unknown; retry later with backoff (a"
                    + " grant that did happen expires after its TTL, a place in the queue after"
                    + " its own)",
            () ->
                orWithoutQueue(
                    () ->
                        OwnTransaction.run(
                            dsl,
                            tx ->
                                Option.ofOptional(
                                    table
                                        .tryAcquireInTurn(
                                            tx, name, owner, ttl, waiter, place, patience)
                                        .queryTimeout(queryTimeoutSeconds)
                                        .fetchOptional(0, Long.class))),
                    () -> acquireStatement(name, owner, ttl)));
    return token.map(FencingToken::of);
  }

  @Override
  public void leaveQueue(String name, String waiter) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    translate(
        () -> "leaving the queue of lock \"" + name + "\"; the place expires on its own",
        () ->
            orWithoutQueue(
                () ->
                    OwnTransaction.run(
                        dsl,
                        tx ->
                            table
                                .leave(tx, name, waiter, PostgresLockConfig.CHANNEL)
                                .queryTimeout(queryTimeoutSeconds)
                                .fetch()
                                .size()),
                () -> 0));
  }

  /**
   * Whether waiting acquires can be woken now: listening on, not found broken lately (its self-test
   * failed, or its connection is down: {@link #listenRetry}), the queue's table usable (or last
   * found unusable more than {@value #RETRY_SECONDS} s ago: it may have been created or granted
   * since), and not closed. Neither finding is for good: a transient outage or a late self-test
   * must not switch the queue off for the life of the process.
   */
  @Override
  public boolean wakesWaiters() {
    long now = System.nanoTime();
    return config.listen()
        && !recent(queueUnusableSince, now, RETRY)
        && !recent(pollingSince, now, listenRetry())
        && !isClosed();
  }

  private static boolean recent(long since, long now, Duration within) {
    return since != NEVER && now - since < within.toNanos();
  }

  /**
   * How long after a listener found it could not listen the next may try: {@value #RETRY_SECONDS}
   * s, doubling with each listener in a row that ended without ever listening (a self-test that
   * never passes: PgBouncer in transaction pooling), up to an hour, so that a setting that will
   * never work costs a warning and a self-test now and then, not every minute.
   */
  private synchronized Duration listenRetry() {
    return RETRY.multipliedBy(1L << Math.min(failedStarts, 6));
  }

  private synchronized boolean isClosed() {
    return closed;
  }

  /**
   * The refusal, when PostgreSQL refused a statement for a missing table ({@code 42P01}) or
   * privilege ({@code 42501}): what a database not migrated to the queue, or a user not granted it,
   * looks like; else null. No other failure switches the queue off (a bug in a statement must
   * surface, not fall back).
   */
  private static SQLException missingTableOrPrivilege(Throwable failure) {
    for (Throwable t = failure; t != null; t = t.getCause()) {
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        boolean refused = sql.getSQLState().equals("42P01") || sql.getSQLState().equals("42501");
        return refused ? sql : null;
      }
    }
    return null;
  }

  /** Whether the listener is up and its self-test passed; for tests that need it first. */
  boolean listening() {
    return listenState == NotificationListener.State.LISTENING;
  }

  /** The server process id of the listen connection, if one is open; for tests that break it. */
  synchronized java.util.OptionalInt listenerBackendPid() {
    return listener == null ? java.util.OptionalInt.empty() : listener.backendPid();
  }

  /**
   * Runs a statement that reads the queue's table; when PostgreSQL refuses it because a table is
   * missing or not granted (a database not yet migrated to V2, a user not granted the new table),
   * runs {@code withoutQueue} instead, and goes without the queue for {@value #RETRY_SECONDS} s (or
   * until {@link #createTableIfMissing}), then tries it again; the first time with a warning.
   * Before the queue existed the lock worked without it, so an upgrade that has not yet created it
   * must not break a release. If {@code withoutQueue} fails too, that failure is what the caller
   * sees.
   */
  private <T> T orWithoutQueue(Supplier<T> withQueue, Supplier<T> withoutQueue) {
    if (recent(queueUnusableSince, System.nanoTime(), RETRY)) {
      return withoutQueue.get();
    }
    try {
      return withQueue.get();
    } catch (DataAccessException e) {
      SQLException refused = missingTableOrPrivilege(e);
      if (refused == null) {
        throw e;
      }
      T result = withoutQueue.get();
      boolean first = queueUnusableSince == NEVER;
      queueUnusableSince = System.nanoTime();
      if (first) {
        LOG.warn(
            "Lock table {}: the queue of waiters {} cannot be used (SQLState {}); acquires wait"
                + " without it,"
                + " polling, as before it existed. Create it (migration V2, or"
                + " createTableIfMissing()) and grant this user SELECT, INSERT, UPDATE and DELETE"
                + " on it; the backend tries it again every {} s.",
            config.table(),
            config.waitersTable(),
            refused.getSQLState(),
            RETRY_SECONDS);
      }
      return result;
    }
  }

  /**
   * Wakes {@code wake} when a notification names {@code waiter} as first in the queue of {@code
   * name}, and once whenever listening (re)starts, until closed. The first subscription starts the
   * listener, which stops {@value #IDLE_SECONDS} s after the last one closed. With {@link
   * PostgresLockConfig#listen()} off, or after {@link #close()}, a subscription that never wakes.
   */
  @Override
  public Subscription onRelease(String name, String waiter, Runnable wake) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    Names.requireName("waiter", waiter, Lease.MAX_OWNER_LENGTH);
    Objects.requireNonNull(wake, "wake");
    if (!config.listen()) {
      return Subscription.NEVER;
    }
    String key = waiter;
    synchronized (this) {
      if (closed) {
        return Subscription.NEVER;
      }
      waiting.put(key, wake);
      if (listener == null || !listener.isRunning()) {
        // None yet, or the last one ended (idle, or its self-test failed a while ago).
        if (listener != null && listenState == NotificationListener.State.POLLING) {
          failedStarts++;
        }
        listenState = NotificationListener.State.STARTING;
        listener = newListener();
        listener.start();
      }
    }
    return () -> unsubscribe(key, wake);
  }

  private synchronized void unsubscribe(String key, Runnable wake) {
    waiting.remove(key, wake);
    if (waiting.isEmpty()) {
      idleSince = System.nanoTime();
    }
  }

  /**
   * Asked by the listener once a second: false (and forgotten, so that the next wait starts a new
   * one) once nobody has waited for {@value #IDLE_SECONDS} s, so that a backend nobody closes does
   * not keep a connection and a thread for good.
   */
  private synchronized boolean stillWanted() {
    if (closed || !waiting.isEmpty() || System.nanoTime() - idleSince < IDLE.toNanos()) {
      return !closed;
    }
    listener = null;
    listenState = NotificationListener.State.STARTING;
    return false;
  }

  private NotificationListener newListener() {
    return new NotificationListener(
        dataSource,
        dsl,
        PostgresLockConfig.CHANNEL,
        "lock table " + config.table(),
        "Waiting acquires poll with the lock's backoff instead, without the queue. Behind"
            + " PgBouncer in transaction pooling set PostgresLockConfig.listen(false): a LISTEN"
            + " there may stay on a server connection that other clients get.",
        LISTEN_POLL,
        SELF_TEST_TIMEOUT,
        new NotificationListener.Receiver() {
          @Override
          public void listening() {
            waiting.values().forEach(Runnable::run);
          }

          @Override
          public void received(List<String> payloads) {
            for (String payload : payloads) {
              Runnable wake = waiting.get(payload);
              if (wake != null) {
                wake.run();
              }
            }
          }
        },
        this::stillWanted,
        state -> {
          listenState = state;
          if (state == NotificationListener.State.POLLING) {
            pollingSince = System.nanoTime();
          } else if (state == NotificationListener.State.LISTENING) {
            pollingSince = NEVER;
            synchronized (this) {
              failedStarts = 0;
            }
          }
        });
  }

  /**
   * Stops listening for releases and gives its connection back to the pool; waiters still waiting
   * poll from then on. Idempotent. The lease calls need nothing closed.
   */
  @Override
  public void close() {
    NotificationListener running;
    synchronized (this) {
      closed = true;
      running = listener;
      listener = null;
    }
    if (running != null) {
      running.close();
    }
  }

  @Override
  public Option<LeaseHolder> holder(String name) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    return translate(
        () -> "reading who holds lock \"" + name + "\"",
        () ->
            Option.ofOptional(
                table
                    .holder(dsl, name)
                    .queryTimeout(queryTimeoutSeconds)
                    .fetchOptional()
                    .map(r -> new LeaseHolder(r.value1(), FencingToken.of(r.value2())))));
  }

  /**
   * Checked before anything is sent: a name or owner longer than its column would reach the
   * database as a refusal a retry repeats, and a blank or control-character one would be stored as
   * given; the facade is not the only caller.
   */
  private static void requireNameAndOwner(String name, String owner) {
    Names.requireName("lock name", name, Lease.MAX_NAME_LENGTH);
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
  }

  private boolean oneRowAtMost(int rows, String name) {
    return SqlErrors.atMostOneRow(rows, "statement on lock \"" + name + "\"", table, "(name)");
  }

  private <T> T translate(Supplier<String> doing, Supplier<T> statement) {
    return SqlErrors.run(doing, statement);
  }

  @Override
  public String toString() {
    return "PostgresLockBackend[" + config + "]";
  }
}
