package dev.nolock.queue.internal;

import dev.nolock.patterns.sql.OwnTransaction;
import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Holds one connection that LISTENs on the queue's channel and wakes the worker pool when a
 * notification for its queue arrives.
 *
 * <p>Algorithm, on its own thread:
 *
 * <ol>
 *   <li>Take a connection, switch it to autocommit (a LISTEN inside an open transaction only takes
 *       effect at commit) and {@code LISTEN channel}.
 *   <li>Self-test: send {@code pg_notify(channel, <random token>)} through the queue's pool and
 *       wait up to the self-test timeout for it on this connection. Behind PgBouncer in transaction
 *       pooling the LISTEN ran on a server connection that went back to PgBouncer's pool, and the
 *       notification never reaches this client: then log a warning, report polling, and stop for
 *       good (a configuration problem, not a transient one).
 *   <li>Report listening, wake the pool once (jobs may have arrived before the LISTEN), then block
 *       in {@code PGConnection.getNotifications(pollInterval)}: no busy loop, and an idle queue
 *       costs one wake-up per poll interval at most.
 *   <li>If the connection fails, report polling, wait one poll interval and start again at 1.
 * </ol>
 *
 * However listening ends (closed, a failed self-test, an error), the connection runs {@code
 * UNLISTEN *} before it goes back to its pool, or is aborted if that fails: the pool never hands
 * out a connection that still listens.
 */
public final class NotificationListener implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(NotificationListener.class);
  private static final String SELF_TEST_PREFIX = "nolock-self-test:";

  /** What the listener reports. */
  public enum State {
    STARTING,
    LISTENING,
    POLLING
  }

  private final DataSource listenOn;
  private final DSLContext notifyThrough;
  private final String channel;
  private final String queue;
  private final Duration pollInterval;
  private final Duration selfTestTimeout;
  private final Runnable wake;
  private final Consumer<State> report;
  private final CountDownLatch closed = new CountDownLatch(1);
  private final Thread thread;
  private volatile Connection current;

  public NotificationListener(
      DataSource listenOn,
      DSLContext notifyThrough,
      String channel,
      String queue,
      Duration pollInterval,
      Duration selfTestTimeout,
      Runnable wake,
      Consumer<State> report) {
    this.listenOn = Objects.requireNonNull(listenOn, "listenOn");
    this.notifyThrough = Objects.requireNonNull(notifyThrough, "notifyThrough");
    this.channel = channel;
    this.queue = queue;
    this.pollInterval = pollInterval;
    this.selfTestTimeout = selfTestTimeout;
    this.wake = wake;
    this.report = report;
    this.thread = new Thread(this::run, "nolock-queue-" + queue + "-listen");
    this.thread.setDaemon(true);
  }

  public void start() {
    report.accept(State.STARTING);
    thread.start();
  }

  private boolean isClosed() {
    return closed.getCount() == 0;
  }

  private void run() {
    while (!isClosed()) {
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
            "Queue \"{}\": the LISTEN connection failed; polling every {} and reconnecting",
            queue,
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
          "Queue \"{}\": LISTEN {} received no self-test notification within {}. The listen"
              + " connection most likely goes through PgBouncer in transaction or statement"
              + " pooling, where LISTEN is silently lost. Falling back to polling every {}."
              + " Give WorkerConfig.listenDataSource a direct connection to PostgreSQL to"
              + " get wake-ups within milliseconds.",
          queue,
          channel,
          selfTestTimeout,
          pollInterval);
      report.accept(State.POLLING);
      return false;
    }
    report.accept(State.LISTENING);
    wake.run();
    while (!isClosed()) {
      handle(pg.getNotifications(Math.toIntExact(pollInterval.toMillis())), null);
    }
    return true;
  }

  private boolean selfTest(PGConnection pg) throws SQLException {
    String token = SELF_TEST_PREFIX + UUID.randomUUID();
    OwnTransaction.run(
        notifyThrough, on -> on.select(PgFunctions.pgNotify(channel, token)).execute());
    long deadline = System.nanoTime() + selfTestTimeout.toNanos();
    for (long left = selfTestTimeout.toNanos(); left > 0; left = deadline - System.nanoTime()) {
      int millis = (int) Math.max(1, TimeUnit.NANOSECONDS.toMillis(left));
      if (handle(pg.getNotifications(millis), token)) {
        return true;
      }
    }
    return false;
  }

  /** Wakes the pool for this queue's notifications; true when {@code token} was among them. */
  private boolean handle(PGNotification[] notifications, String token) {
    if (notifications == null) {
      return false;
    }
    boolean sawToken = false;
    boolean wakeUp = false;
    for (PGNotification n : notifications) {
      String payload = n.getParameter();
      if (queue.equals(payload)) {
        wakeUp = true;
      } else if (token != null && token.equals(payload)) {
        sawToken = true;
      }
    }
    if (wakeUp) {
      wake.run();
    }
    return sawToken;
  }

  /**
   * {@code UNLISTEN *} before the connection goes back to its pool, on every path: a session that
   * still listens would hand the queue's notifications to the pool's next borrower, whose pgjdbc
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
      LOG.debug("Queue \"{}\": UNLISTEN failed; dropping the connection", queue, e);
      try {
        connection.abort(Runnable::run);
      } catch (SQLException | RuntimeException aborting) {
        LOG.debug("Queue \"{}\": aborting the LISTEN connection failed", queue, aborting);
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
          on ->
              on.select(PgFunctions.pgNotify(channel, "nolock-stop:" + UUID.randomUUID()))
                  .execute());
      thread.join(2_000);
    } catch (RuntimeException e) {
      LOG.debug("Queue \"{}\": could not wake the listen thread with a notification", queue, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    Connection connection = current;
    if (thread.isAlive() && connection != null) {
      try {
        connection.abort(Runnable::run); // unblocks getNotifications at once
      } catch (SQLException | RuntimeException e) {
        LOG.debug("Queue \"{}\": aborting the LISTEN connection failed", queue, e);
      }
    }
    try {
      thread.join(pollInterval.plus(selfTestTimeout).plusSeconds(1).toMillis());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
