package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Holds one connection that LISTENs on a channel and hands what arrives on it to a {@link
 * Receiver}: the queue's worker pool waking for new jobs, the lock's waiters waking for a release.
 * pgjdbc delivers notifications only to a connection that reads from the server, and a pool's
 * connections are borrowed and returned, so one connection is kept for listening alone.
 *
 * <p>Algorithm, on its own thread:
 *
 * <ol>
 *   <li>Take a connection, switch it to autocommit (a LISTEN inside an open transaction only takes
 *       effect at commit) and {@code LISTEN channel}.
 *   <li>Self-test: send {@code pg_notify(channel, <random token>)} through the caller's pool and
 *       wait up to the self-test timeout for it on this connection. Behind PgBouncer in transaction
 *       pooling the LISTEN ran on a server connection that went back to PgBouncer's pool, and the
 *       notification never reaches this client: then log a warning, report polling, and stop for
 *       good (a configuration problem, not a transient one).
 *   <li>Report listening, tell the receiver once (something may have been sent before the LISTEN),
 *       then block in {@code PGConnection.getNotifications(pollInterval)} and hand each batch's
 *       payloads to the receiver: no busy loop.
 *   <li>Every 30 s, check the connection with a round trip: reading alone never notices one that
 *       died half-open.
 *   <li>If the connection fails, report polling, wait one poll interval and start again at 1.
 * </ol>
 *
 * However listening ends (closed, a failed self-test, an error), the connection runs {@code
 * UNLISTEN *} before it goes back to its pool, or is aborted if that fails: the pool never hands
 * out a connection that still listens.
 */
public final class NotificationListener implements AutoCloseable {

  /** What a listener hands on; called on its thread, so each call must return at once. */
  public interface Receiver {
    /** Listening began, or began again after a failure: anything may have been sent meanwhile. */
    void listening();

    /** The payloads of one batch of notifications on the channel, the listener's own left out. */
    void received(List<String> payloads);
  }

  private static final Logger LOG = LoggerFactory.getLogger(NotificationListener.class);
  private static final String SELF_TEST_PREFIX = "nolock-self-test:";
  private static final String STOP_PREFIX = "nolock-stop:";
  private static final Duration CHECK_EVERY = Duration.ofSeconds(30);

  /** What the listener reports. */
  public enum State {
    STARTING,
    LISTENING,
    POLLING
  }

  private final DataSource listenOn;
  private final DSLContext notifyThrough;
  private final String channel;
  private final String label;
  private final String pgBouncerAdvice;
  private final Duration pollInterval;
  private final Duration selfTestTimeout;
  private final Receiver receiver;
  private final BooleanSupplier wanted;
  private final Consumer<State> report;
  private final CountDownLatch closed = new CountDownLatch(1);
  private final Thread thread;
  private volatile Connection current;

  /**
   * A listener, not yet started.
   *
   * @param listenOn where the listen connection comes from
   * @param notifyThrough where the self-test and the stop notification are sent from
   * @param channel a validated SQL identifier ({@link SqlNames#requireSqlIdentifier})
   * @param label what the logs and the thread's name call the listener's user, e.g. {@code queue
   *     "emails"}
   * @param pgBouncerAdvice the log's advice when the self-test fails, e.g. which setting takes a
   *     direct connection
   * @param pollInterval the longest wait for a notification, and the wait before reconnecting
   * @param selfTestTimeout how long the self-test notification may take to arrive
   * @param wanted asked once per poll interval: when it answers false, the listener stops for good,
   *     as if closed (a listener needed only while someone waits)
   */
  public NotificationListener(
      DataSource listenOn,
      DSLContext notifyThrough,
      String channel,
      String label,
      String pgBouncerAdvice,
      Duration pollInterval,
      Duration selfTestTimeout,
      Receiver receiver,
      BooleanSupplier wanted,
      Consumer<State> report) {
    this.listenOn = Objects.requireNonNull(listenOn, "listenOn");
    this.notifyThrough = Objects.requireNonNull(notifyThrough, "notifyThrough");
    this.channel = channel;
    this.label = label;
    this.pgBouncerAdvice = pgBouncerAdvice;
    this.pollInterval = pollInterval;
    this.selfTestTimeout = selfTestTimeout;
    this.receiver = Objects.requireNonNull(receiver, "receiver");
    this.wanted = Objects.requireNonNull(wanted, "wanted");
    this.report = report;
    this.thread =
        new Thread(this::run, "nolock-" + label.replaceAll("[^A-Za-z0-9_-]+", "-") + "-listen");
    this.thread.setDaemon(true);
  }

  /** The server process id of the listen connection while one is open. */
  public java.util.OptionalInt backendPid() {
    Connection connection = current;
    if (connection == null) {
      return java.util.OptionalInt.empty();
    }
    try {
      return java.util.OptionalInt.of(connection.unwrap(PGConnection.class).getBackendPID());
    } catch (SQLException | RuntimeException e) {
      return java.util.OptionalInt.empty();
    }
  }

  /** Whether its thread still runs: started, and neither closed nor given up. */
  public boolean isRunning() {
    return thread.isAlive();
  }

  public void start() {
    report.accept(State.STARTING);
    thread.start();
  }

  private boolean isClosed() {
    return closed.getCount() == 0;
  }

  /** Whether to go on listening: not closed, and still wanted by its owner; once not, never. */
  private boolean isWanted() {
    if (!isClosed() && !wanted.getAsBoolean()) {
      closed.countDown();
    }
    return !isClosed();
  }

  private void run() {
    while (isWanted()) {
      try (Connection connection = listenOn.getConnection()) {
        current = connection;
        try {
          if (!listen(connection)) {
            return;
          }
        } finally {
          unlisten(connection);
        }
      } catch (SQLException | RuntimeException e) {
        if (isClosed()) {
          return;
        }
        report.accept(State.POLLING);
        LOG.warn(
            "{}: the LISTEN connection failed; polling every {} and reconnecting",
            label,
            pollInterval,
            e);
        awaitClose(pollInterval);
      } finally {
        current = null;
      }
    }
  }

  /**
   * Listens on {@code connection} until closed; false when the self-test failed and the pool must
   * poll for good.
   */
  private boolean listen(Connection connection) throws SQLException {
    connection.setAutoCommit(true);
    // jOOQ has no LISTEN statement: a plain SQL template with the channel as a validated
    // identifier (SqlNames.requireSqlIdentifier), which jOOQ quotes. Nothing else goes in.
    DSL.using(connection, SQLDialect.POSTGRES).query("LISTEN {0}", DSL.name(channel)).execute();
    PGConnection pg = connection.unwrap(PGConnection.class);
    if (!selfTest(pg)) {
      LOG.warn(
          "{}: LISTEN {} received no self-test notification within {}. The listen"
              + " connection most likely goes through PgBouncer in transaction or statement"
              + " pooling, where LISTEN is silently lost. Falling back to polling every {}. {}",
          label,
          channel,
          selfTestTimeout,
          pollInterval,
          pgBouncerAdvice);
      report.accept(State.POLLING);
      return false;
    }
    report.accept(State.LISTENING);
    receiver.listening();
    long checked = System.nanoTime();
    while (isWanted()) {
      handle(pg.getNotifications(Math.toIntExact(pollInterval.toMillis())), null);
      if (System.nanoTime() - checked > CHECK_EVERY.toNanos()) {
        // Reading alone never notices a connection that died half-open (a host gone, a NAT's idle
        // timeout): a round trip now and then does, and the loop reconnects.
        if (!connection.isValid(Math.toIntExact(CHECK_EVERY.toSeconds()))) {
          throw new SQLException("the LISTEN connection no longer answers");
        }
        checked = System.nanoTime();
      }
    }
    return true;
  }

  private boolean selfTest(PGConnection pg) throws SQLException {
    String token = SELF_TEST_PREFIX + UUID.randomUUID();
    OwnTransaction.run(notifyThrough, on -> on.select(pgNotify(channel, token)).execute());
    long deadline = System.nanoTime() + selfTestTimeout.toNanos();
    for (long left = selfTestTimeout.toNanos(); left > 0; left = deadline - System.nanoTime()) {
      int millis = (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(left));
      if (handle(pg.getNotifications(millis), token)) {
        return true;
      }
    }
    return false;
  }

  /**
   * Hands the payloads of {@code notifications} to the receiver, the listener's own left out; true
   * when {@code token} was among them.
   */
  private boolean handle(PGNotification[] notifications, String token) {
    if (notifications == null) {
      return false;
    }
    boolean sawToken = false;
    List<String> payloads = new ArrayList<>(notifications.length);
    for (PGNotification n : notifications) {
      String payload = n.getParameter();
      if (token != null && token.equals(payload)) {
        sawToken = true;
      } else if (!payload.startsWith(SELF_TEST_PREFIX) && !payload.startsWith(STOP_PREFIX)) {
        payloads.add(payload);
      }
    }
    if (!payloads.isEmpty()) {
      receiver.received(payloads);
    }
    return sawToken;
  }

  /** {@code pg_notify(:channel, :payload)}; both bound. */
  public static Field<Object> pgNotify(String channel, String payload) {
    return function(unquotedName("pg_notify"), SQLDataType.OTHER, val(channel), val(payload));
  }

  /**
   * {@code UNLISTEN *} before the connection goes back to its pool, on every path: a session that
   * still listens would hand the channel's notifications to the pool's next borrower, whose pgjdbc
   * queues them unread. When the UNLISTEN cannot run, the connection is aborted, so the pool drops
   * it instead of handing it out again.
   */
  private void unlisten(Connection connection) {
    try {
      if (connection.isClosed()) {
        return; // aborted by close(): the pool drops it
      }
      DSL.using(connection, SQLDialect.POSTGRES).query("UNLISTEN *").execute();
    } catch (SQLException | RuntimeException e) {
      LOG.debug("{}: UNLISTEN failed; dropping the connection", label, e);
      try {
        connection.abort(Runnable::run);
      } catch (SQLException | RuntimeException aborting) {
        LOG.debug("{}: aborting the LISTEN connection failed", label, aborting);
      }
    }
  }

  private void awaitClose(Duration timeout) {
    try {
      closed.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Stops listening and returns once the listen thread has ended. The thread is woken by a
   * notification sent to itself; if that cannot be sent, the connection is aborted.
   */
  @Override
  public void close() {
    closed.countDown();
    if (!thread.isAlive()) {
      return;
    }
    try {
      OwnTransaction.run(
          notifyThrough,
          on -> on.select(pgNotify(channel, STOP_PREFIX + UUID.randomUUID())).execute());
      thread.join(2_000);
    } catch (RuntimeException e) {
      LOG.debug("{}: could not wake the listen thread with a notification", label, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    Connection connection = current;
    if (thread.isAlive() && connection != null) {
      try {
        connection.abort(Runnable::run); // unblocks getNotifications at once
      } catch (SQLException | RuntimeException e) {
        LOG.debug("{}: aborting the LISTEN connection failed", label, e);
      }
    }
    try {
      thread.join(pollInterval.plus(selfTestTimeout).plusSeconds(1).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
