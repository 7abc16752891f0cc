package dev.nolock.spring;

import dev.nolock.spring.internal.OwnConnections;
import java.sql.Connection;
import java.sql.SQLException;
import java.util.Objects;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.springframework.jdbc.CannotGetJdbcConnectionException;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * The caller's transaction, for nolock's caller's-transaction paths in a Spring application: {@code
 * queue.enqueue(transactions.current(), job)}, {@code queue.complete(transactions.current(), job)},
 * {@code fence.write(transactions.current(), lease, writes)}.
 *
 * <p>Guarantee: the statements of such a call run on the connection of the Spring-managed
 * transaction of the calling thread (with {@code DataSourceTransactionManager} or {@code
 * JpaTransactionManager}), so they commit or roll back with the caller's own writes; nolock never
 * commits or rolls that transaction back. Without such a transaction the call is refused before a
 * statement is sent, because the statements would otherwise commit one by one on their own.
 *
 * <ol>
 *   <li>{@link #current()} checks that a Spring transaction is active on this thread and is not
 *       read-only.
 *   <li>It returns a jOOQ context over the one connection of that transaction ({@link
 *       DataSourceUtils#getConnection}), not over a {@code DataSource}: nolock's methods treat a
 *       context over a {@code DataSource} as "open a transaction of your own" and commit it through
 *       jOOQ's transaction API, which, on a transaction-aware proxy, would commit the caller's
 *       Spring transaction midway; on one connection with autocommit off they join it instead (the
 *       fence behind a savepoint) and never commit.
 *   <li>It refuses a connection in autocommit mode, which is what Spring hands out when the active
 *       transaction belongs to another {@code DataSource}: every caller's-transaction path (the
 *       fence's too, which would otherwise commit on its own) then runs in the caller's transaction
 *       or not at all.
 * </ol>
 *
 * <p>Everything else nolock does (lock acquire, renew and release, claims, heartbeats, reaping,
 * schedule and partition claims, idempotency phases) runs on connections of its own from the same
 * pool, never in the caller's transaction; a pool must therefore have a connection to spare for
 * nolock while a caller's transaction holds one.
 */
public final class NolockTransactions {

  private final DataSource dataSource;

  /**
   * @param dataSource nolock's {@code DataSource}, the one the application's transaction manager
   *     manages
   */
  public NolockTransactions(DataSource dataSource) {
    Objects.requireNonNull(dataSource, "dataSource");
    this.dataSource = OwnConnections.of(dataSource);
  }

  /**
   * The jOOQ context of the calling thread's Spring-managed transaction, on its connection; use it
   * within that transaction only.
   *
   * @throws IllegalStateException when no Spring transaction is active on this thread, when it is
   *     read-only, or when it is not on nolock's {@code DataSource}
   */
  public DSLContext current() {
    if (!TransactionSynchronizationManager.isActualTransactionActive()) {
      throw new IllegalStateException(
          "No Spring-managed transaction is active on this thread, so nolock's statements would"
              + " commit on their own, apart from your writes. Call from a @Transactional method"
              + " (or inside TransactionTemplate.execute), or call the method without a context"
              + " (e.g. enqueue(job)) to commit in a transaction of its own.");
    }
    if (TransactionSynchronizationManager.isCurrentTransactionReadOnly()) {
      throw new IllegalStateException(
          "The Spring-managed transaction on this thread is read-only, and nolock's statements"
              + " write: remove readOnly = true from the @Transactional that encloses this call.");
    }
    Connection connection = DataSourceUtils.getConnection(dataSource);
    boolean autoCommit;
    try {
      autoCommit = connection.getAutoCommit();
    } catch (SQLException e) {
      DataSourceUtils.releaseConnection(connection, dataSource);
      throw new CannotGetJdbcConnectionException("Could not read the connection's auto-commit", e);
    }
    if (autoCommit) {
      // Spring hands out a connection of its own when the active transaction belongs to another
      // DataSource: statements on it would commit one by one, apart from the caller's writes.
      DataSourceUtils.releaseConnection(connection, dataSource);
      throw new IllegalStateException(
          "The Spring-managed transaction on this thread is not on nolock's DataSource (it belongs"
              + " to another DataSource's transaction manager, or to a JPA dialect that does not"
              + " expose its JDBC connection), so nolock's statements would commit on their own:"
              + " run the call in a transaction of the transaction manager of nolock's"
              + " DataSource.");
    }
    return DSL.using(connection, SQLDialect.POSTGRES);
  }
}
