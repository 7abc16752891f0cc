package dev.nolock.spring.internal;

import java.sql.Connection;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Runs application code inside one of nolock's own transactions (an idempotency phase, a fenced
 * scheduled run, a partition apply) so that the application's Spring data access ({@code
 * JdbcTemplate}, jOOQ through Spring, {@code NolockTransactions.current()}) writes in that
 * transaction: where the attempt or epoch check lives, and commits or rolls back with it.
 *
 * <ol>
 *   <li>Refuses when the thread already has a Spring transaction on the same {@code DataSource}:
 *       the code would otherwise write in two transactions at once, its own and nolock's, and only
 *       one of them is fenced.
 *   <li>Binds nolock's connection to the thread as Spring binds a transaction's ({@link
 *       TransactionSynchronizationManager#bindResource}, keyed by the {@code DataSource} without
 *       transaction-aware proxies, as {@code DataSourceTransactionManager} keys it), marked active,
 *       so {@code DataSourceUtils.getConnection} returns it and a nested {@code @Transactional}
 *       (propagation {@code REQUIRED}) joins it.
 *   <li>Runs the code and unbinds in {@code finally}; nolock then commits or rolls back. When a
 *       nested {@code @Transactional} marked the transaction rollback-only and the code swallowed
 *       its exception, {@link UnexpectedRollbackException} is thrown so that nolock rolls back, as
 *       Spring would refuse the commit. Spring's transaction synchronizations are not started: an
 *       {@code afterCommit} callback registered inside would have no commit of Spring's to follow.
 * </ol>
 *
 * <p>JPA inside such code is not joined: an {@code EntityManager} is bound by {@code
 * JpaTransactionManager} only, and it would try to start a transaction of its own on this thread
 * and fail (Spring refuses to bind a second connection for the {@code DataSource}).
 */
public final class BoundTransactions {

  /** The application's code, run with nolock's transaction bound. */
  @FunctionalInterface
  public interface Work<T, X extends Exception> {
    T call() throws X;
  }

  private BoundTransactions() {}

  /**
   * Runs {@code work} with {@code tx}'s connection bound as the thread's Spring transaction for
   * {@code dataSource}.
   *
   * @param dataSource the application's {@code DataSource} (proxies are taken off)
   * @param tx jOOQ on nolock's open transaction
   * @throws IllegalStateException when a Spring transaction on {@code dataSource} is already bound
   *     to this thread
   */
  public static <T, X extends Exception> T call(
      DataSource dataSource, DSLContext tx, Work<T, X> work) throws X {
    DataSource key = OwnConnections.of(dataSource);
    if (TransactionSynchronizationManager.hasResource(key)) {
      throw new IllegalStateException(
          "nolock runs this code in a transaction of its own (where its attempt or epoch check"
              + " commits with your writes), but the thread already has a Spring transaction on"
              + " the same DataSource: remove @Transactional (or TransactionTemplate) around the"
              + " call, so that your writes are not split across two transactions.");
    }
    Connection connection = tx.configuration().connectionProvider().acquire();
    boolean wasActive = TransactionSynchronizationManager.isActualTransactionActive();
    ActiveHolder holder = new ActiveHolder(connection);
    TransactionSynchronizationManager.bindResource(key, holder);
    TransactionSynchronizationManager.setActualTransactionActive(true);
    try {
      T result = work.call();
      if (holder.isRollbackOnly()) {
        // A nested @Transactional failed and the code caught its exception: Spring would refuse
        // the outer commit, so nolock must not commit either.
        throw new UnexpectedRollbackException(
            "A @Transactional method called inside marked nolock's transaction rollback-only (its"
                + " exception was caught); nothing of this transaction is committed.");
      }
      return result;
    } finally {
      TransactionSynchronizationManager.setActualTransactionActive(wasActive);
      TransactionSynchronizationManager.unbindResource(key);
      tx.configuration().connectionProvider().release(connection);
    }
  }

  /** A holder whose transaction is active, so that a nested {@code @Transactional} joins it. */
  private static final class ActiveHolder extends ConnectionHolder {
    ActiveHolder(Connection connection) {
      super(connection);
      setSynchronizedWithTransaction(true);
      setTransactionActive(true);
    }
  }
}
