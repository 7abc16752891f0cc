package dev.nolock.spring.internal;

import java.sql.Connection;
import java.util.List;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.Ordered;
import org.springframework.jdbc.datasource.ConnectionHolder;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionSynchronizationUtils;

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
 *   <li>Starts Spring's transaction synchronization, so that a nested {@code @Transactional} joins
 *       as a participant instead of completing the synchronization itself.
 *   <li>Runs the code and unbinds in {@code finally}; nolock then commits or rolls back. When a
 *       nested {@code @Transactional} marked the transaction rollback-only and the code swallowed
 *       its exception, {@link UnexpectedRollbackException} is thrown so that nolock rolls back, as
 *       Spring would refuse the commit. Callbacks the code registered ({@code afterCommit}, a
 *       {@code @TransactionalEventListener}) are refused, or handed to a caller that runs them once
 *       nolock's commit is known.
 * </ol>
 *
 * <p>A nested {@code @Transactional(propagation = REQUIRES_NEW)} (or {@code NOT_SUPPORTED}) is
 * refused: what it writes would commit on its own, outside nolock's check.
 *
 * <p>JPA inside such code is not joined: an {@code EntityManager} is bound by {@code
 * JpaTransactionManager} only, and it would try to start a transaction of its own on this thread
 * and fail (Spring refuses to bind a second connection for the {@code DataSource}).
 */
public final class BoundTransactions {

  private static final Logger LOG = LoggerFactory.getLogger(BoundTransactions.class);

  /**
   * Refuses a nested {@code @Transactional(REQUIRES_NEW)} or {@code NOT_SUPPORTED}: Spring suspends
   * the synchronizations before it unbinds the transaction, and what such a call writes would
   * commit on its own, outside nolock's check, once per attempt.
   */
  private static final TransactionSynchronization NO_SUSPENSION =
      new TransactionSynchronization() {
        @Override
        public void suspend() {
          throw new IllegalStateException(
              "A @Transactional(propagation = REQUIRES_NEW or NOT_SUPPORTED) was called inside"
                  + " nolock's own transaction: its writes would commit apart from nolock's check"
                  + " (the idempotency key's attempt, the scheduled run's, the owner's epoch), once"
                  + " per attempt. Call it with the default propagation, REQUIRED, so that it"
                  + " joins.");
        }

        @Override
        public int getOrder() {
          return Ordered.HIGHEST_PRECEDENCE;
        }
      };

  /** Spring's own synchronization for a connection it bound to a transaction; package-private. */
  private static final String CONNECTION_SYNCHRONIZATION =
      "org.springframework.jdbc.datasource.DataSourceUtils$ConnectionSynchronization";

  /** The application's code, run with nolock's transaction bound. */
  @FunctionalInterface
  public interface Work<T, X extends Exception> {
    T call() throws X;
  }

  private BoundTransactions() {}

  /**
   * Runs {@code work} with {@code tx}'s connection bound as the thread's Spring transaction for
   * {@code dataSource}; a transaction synchronization the code registers is refused (nothing is
   * committed), because nolock commits after this returns, where no callback of Spring's follows.
   *
   * @param dataSource the application's {@code DataSource} (proxies are taken off)
   * @param tx jOOQ on nolock's open transaction
   * @throws IllegalStateException when a Spring transaction on {@code dataSource} is already bound
   *     to this thread, or when the code registered a transaction synchronization
   */
  public static <T, X extends Exception> T call(
      DataSource dataSource, DSLContext tx, Work<T, X> work) throws X {
    return call(dataSource, tx, work, null);
  }

  /**
   * As {@link #call(DataSource, DSLContext, Work)}, but the transaction synchronizations the code
   * registers (a {@code @TransactionalEventListener}'s, an {@code afterCommit} callback) are kept:
   * their {@code beforeCommit} and {@code beforeCompletion} run when the code returns, and they are
   * added to {@code registered} for the caller, who runs {@link #afterCommit} or {@link
   * #afterRollback} once it knows what became of nolock's transaction.
   */
  public static <T, X extends Exception> T call(
      DataSource dataSource,
      DSLContext tx,
      Work<T, X> work,
      List<TransactionSynchronization> registered)
      throws X {
    // Under the pool (as DataSourceTransactionManager keys it) and, when the application's bean
    // is a proxy, under that bean too: a JdbcTemplate over the bean looks its key up, and finding
    // none it would take a second connection.
    List<DataSource> keys =
        OwnConnections.of(dataSource) == dataSource
            ? List.of(dataSource)
            : List.of(OwnConnections.of(dataSource), dataSource);
    if (keys.stream().anyMatch(TransactionSynchronizationManager::hasResource)) {
      throw new IllegalStateException(
          "nolock runs this code in a transaction of its own (where its attempt or epoch check"
              + " commits with your writes), but the thread already has a Spring transaction on"
              + " the same DataSource: remove @Transactional (or TransactionTemplate) around the"
              + " call, so that your writes are not split across two transactions.");
    }
    Connection connection = tx.configuration().connectionProvider().acquire();
    boolean wasActive = TransactionSynchronizationManager.isActualTransactionActive();
    // Started here, so that a nested @Transactional joins as a participant: as the one that
    // started them, it would run afterCommit callbacks when it returns, before nolock commits, and
    // then clear the thread's transaction state.
    boolean ownSynchronization = !TransactionSynchronizationManager.isSynchronizationActive();
    ActiveHolder holder = new ActiveHolder(connection);
    keys.forEach(key -> TransactionSynchronizationManager.bindResource(key, holder));
    TransactionSynchronizationManager.setActualTransactionActive(true);
    if (ownSynchronization) {
      TransactionSynchronizationManager.initSynchronization();
      TransactionSynchronizationManager.registerSynchronization(NO_SUSPENSION);
    }
    boolean handedOver = false;
    try {
      T result = work.call();
      if (holder.isRollbackOnly()) {
        // A nested @Transactional failed and the code caught its exception: Spring would refuse
        // the outer commit, so nolock must not commit either.
        throw new UnexpectedRollbackException(
            "A @Transactional method called inside marked nolock's transaction rollback-only (its"
                + " exception was caught); nothing of this transaction is committed.");
      }
      if (ownSynchronization) {
        releaseOtherConnections();
      }
      if (ownSynchronization
          && !TransactionSynchronizationManager.getSynchronizations().isEmpty()) {
        if (registered == null) {
          throw new IllegalStateException(
              "The code registered a transaction synchronization (a @TransactionalEventListener's"
                  + " event, an afterCommit callback), but nolock commits this transaction itself,"
                  + " after the code returns, where no callback of Spring's can follow; nothing is"
                  + " committed. Enqueue a job with NolockTransactions.current() instead: it"
                  + " commits with these writes.");
        }
        TransactionSynchronizationUtils.triggerBeforeCommit(false);
        TransactionSynchronizationUtils.triggerBeforeCompletion();
        registered.addAll(TransactionSynchronizationManager.getSynchronizations());
        handedOver = true;
      }
      return result;
    } finally {
      if (ownSynchronization) {
        if (!handedOver) {
          // As Spring completes a transaction that rolls back: resources bound by the callbacks
          // are released, and none of their afterCommit runs.
          List<TransactionSynchronization> callbacks =
              TransactionSynchronizationManager.getSynchronizations();
          TransactionSynchronizationUtils.triggerBeforeCompletion();
          TransactionSynchronizationUtils.invokeAfterCompletion(
              callbacks, TransactionSynchronization.STATUS_ROLLED_BACK);
        }
        TransactionSynchronizationManager.clearSynchronization();
      }
      TransactionSynchronizationManager.setActualTransactionActive(wasActive);
      keys.forEach(TransactionSynchronizationManager::unbindResource);
      tx.configuration().connectionProvider().release(connection);
    }
  }

  /**
   * Completes, now, the synchronizations Spring registered for connections of other DataSources the
   * code used (they run in auto-commit: nothing of theirs waits for nolock's commit), so that those
   * connections are released and only the code's own callbacks remain.
   */
  private static void releaseOtherConnections() {
    List<TransactionSynchronization> all = TransactionSynchronizationManager.getSynchronizations();
    TransactionSynchronizationManager.clearSynchronization();
    TransactionSynchronizationManager.initSynchronization();
    all.stream()
        .filter(sync -> sync != NO_SUSPENSION)
        .forEach(TransactionSynchronizationManager::registerSynchronization);
    all = TransactionSynchronizationManager.getSynchronizations();
    // Only Spring's JDBC connection synchronizations: other resources (a transactional Kafka
    // producer, a transacted JMS session) commit with the transaction and must wait for nolock's.
    List<TransactionSynchronization> resources =
        all.stream()
            .filter(sync -> sync.getClass().getName().equals(CONNECTION_SYNCHRONIZATION))
            .toList();
    if (resources.isEmpty()) {
      return;
    }
    resources.forEach(TransactionSynchronization::beforeCompletion);
    TransactionSynchronizationUtils.invokeAfterCompletion(
        resources, TransactionSynchronization.STATUS_UNKNOWN);
    TransactionSynchronizationManager.clearSynchronization();
    TransactionSynchronizationManager.initSynchronization();
    all.stream()
        .filter(s -> !resources.contains(s))
        .forEach(TransactionSynchronizationManager::registerSynchronization);
  }

  /**
   * Runs the {@code afterCommit} and {@code afterCompletion} of callbacks kept by {@link #call}.
   */
  public static void afterCommit(List<TransactionSynchronization> registered) {
    // One by one, each failure logged: the transaction has committed, and a callback that fails
    // must neither turn that into a failure for the caller nor keep the others from running.
    for (TransactionSynchronization callback : registered) {
      guarded(callback, TransactionSynchronization::afterCommit);
    }
    for (TransactionSynchronization callback : registered) {
      guarded(callback, c -> c.afterCompletion(TransactionSynchronization.STATUS_COMMITTED));
    }
  }

  /**
   * Runs the {@code afterCompletion} of callbacks kept by {@link #call} when nolock's transaction
   * rolled back, or ({@code unknown}) when its outcome is unknown.
   */
  public static void afterRollback(List<TransactionSynchronization> registered, boolean unknown) {
    int status =
        unknown
            ? TransactionSynchronization.STATUS_UNKNOWN
            : TransactionSynchronization.STATUS_ROLLED_BACK;
    for (TransactionSynchronization callback : registered) {
      guarded(callback, c -> c.afterCompletion(status));
    }
  }

  private static void guarded(
      TransactionSynchronization callback,
      java.util.function.Consumer<TransactionSynchronization> run) {
    try {
      run.accept(callback);
    } catch (RuntimeException | LinkageError e) {
      LOG.error(
          "A transaction callback failed after nolock's transaction completed: {}", callback, e);
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
