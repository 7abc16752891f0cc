package dev.nolock.spring.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.spring.NolockTransactions;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.transaction.UnexpectedRollbackException;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * Spring data access inside {@link BoundTransactions#call} writes in nolock's transaction: it
 * commits and rolls back with it, a nested {@code @Transactional} joins it, and a Spring
 * transaction already on the thread is refused. The control runs the same writes without the
 * binding and sees them commit on their own, apart from nolock's rollback.
 */
@ExtendWith(PostgresExtension.class)
class BoundTransactionsIT {

  private final PostgresSchema schema;
  private DataSource dataSource;
  private DSLContext nolock;
  private JdbcTemplate jdbc;

  BoundTransactionsIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeEach
  void tables() {
    schema.dsl().execute("drop table if exists bound_writes");
    schema.dsl().execute("create table bound_writes (id int primary key)");
    DataSource pool = new DriverManagerDataSource(schema.jdbcUrl());
    nolock = DSL.using(pool, SQLDialect.POSTGRES);
    // The application's DataSource bean is a proxy (as jOOQ's or a library's setup may make it):
    // nolock binds under the pool and under the bean.
    dataSource = new TransactionAwareDataSourceProxy(pool);
    jdbc = new JdbcTemplate(dataSource);
  }

  @AfterEach
  void nothingLeftBound() {
    assertThat(TransactionSynchronizationManager.getResourceMap()).isEmpty();
    assertThat(TransactionSynchronizationManager.isSynchronizationActive()).isFalse();
    assertThat(TransactionSynchronizationManager.isActualTransactionActive()).isFalse();
  }

  private long rows() {
    return schema.dsl().fetchCount(DSL.table("bound_writes"));
  }

  @Test
  void springWritesInsideRollBackWithNolocksTransaction() {
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx ->
                        BoundTransactions.call(
                            dataSource,
                            tx.dsl(),
                            () -> {
                              jdbc.update("insert into bound_writes values (1)");
                              throw new IllegalStateException("the phase fails after writing");
                            })))
        .hasMessage("the phase fails after writing");
    assertThat(rows()).isZero();
  }

  @Test
  void withoutTheBindingTheSameWritesCommitOnTheirOwn() {
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx -> {
                      jdbc.update("insert into bound_writes values (1)");
                      throw new IllegalStateException("the phase fails after writing");
                    }))
        .hasMessage("the phase fails after writing");
    assertThat(rows()).as("the control: a write outside the binding escapes the rollback").isOne();
  }

  @Test
  void springWritesInsideCommitWithNolocksTransactionAndANestedTransactionalJoinsIt() {
    TransactionTemplate nested =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    nolock.transaction(
        tx ->
            BoundTransactions.call(
                dataSource,
                tx.dsl(),
                () -> {
                  jdbc.update("insert into bound_writes values (1)");
                  nested.executeWithoutResult(
                      status -> {
                        assertThat(status.isNewTransaction()).isFalse();
                        jdbc.update("insert into bound_writes values (2)");
                      });
                  // Not yet visible elsewhere: both writes wait for nolock's commit.
                  assertThat(rows()).isZero();
                  return null;
                }));
    assertThat(rows()).isEqualTo(2);
  }

  @Test
  void aNestedTransactionalThatFailedQuietlyRollsNolocksTransactionBack() {
    TransactionTemplate nested =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx ->
                        BoundTransactions.call(
                            dataSource,
                            tx.dsl(),
                            () -> {
                              jdbc.update("insert into bound_writes values (1)");
                              try {
                                nested.executeWithoutResult(
                                    status -> {
                                      throw new IllegalArgumentException("inner fails");
                                    });
                              } catch (IllegalArgumentException swallowed) {
                                // the application's choice; Spring marked rollback-only
                              }
                              return null;
                            })))
        .isInstanceOf(UnexpectedRollbackException.class);
    assertThat(rows()).isZero();
  }

  @Test
  void afterANestedTransactionalTheCallersTransactionIsStillNolocksAndRollsBackWithIt() {
    TransactionTemplate nested =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    NolockTransactions transactions = new NolockTransactions(dataSource);
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx ->
                        BoundTransactions.call(
                            dataSource,
                            tx.dsl(),
                            () -> {
                              nested.executeWithoutResult(
                                  status -> jdbc.update("insert into bound_writes values (1)"));
                              // A nested @Transactional that completed the synchronization itself
                              // would have cleared the thread's transaction: current() refuses.
                              transactions.current().execute("insert into bound_writes values (2)");
                              throw new IllegalStateException("the phase fails after writing");
                            })))
        .hasMessage("the phase fails after writing");
    assertThat(rows()).isZero();
  }

  @Test
  void aCallbackRegisteredInsideIsRefusedAndNothingCommits() {
    AtomicBoolean committedCallback = new AtomicBoolean();
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx ->
                        BoundTransactions.call(
                            dataSource,
                            tx.dsl(),
                            () -> {
                              jdbc.update("insert into bound_writes values (1)");
                              TransactionSynchronizationManager.registerSynchronization(
                                  afterCommitSets(committedCallback));
                              return null;
                            })))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("registered a transaction synchronization");
    assertThat(rows()).isZero();
    assertThat(committedCallback).isFalse();
  }

  @Test
  void aCallbackKeptForTheCallerRunsOnlyWhenTheCallerSaysItCommitted() {
    AtomicBoolean committedCallback = new AtomicBoolean();
    List<TransactionSynchronization> kept = new ArrayList<>();
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx -> {
                      BoundTransactions.call(
                          dataSource,
                          tx.dsl(),
                          () -> {
                            TransactionSynchronizationManager.registerSynchronization(
                                afterCommitSets(committedCallback));
                            return null;
                          },
                          kept);
                      throw new IllegalStateException("nolock's commit does not happen");
                    }))
        .hasMessage("nolock's commit does not happen");
    assertThat(kept).hasSize(1);
    assertThat(committedCallback).as("not run by the call itself").isFalse();
    BoundTransactions.afterCommit(kept);
    assertThat(committedCallback).isTrue();
  }

  @Test
  void aNestedRequiresNewIsRefusedAndNothingCommits() {
    TransactionTemplate requiresNew =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    requiresNew.setPropagationBehavior(TransactionTemplate.PROPAGATION_REQUIRES_NEW);
    assertThatThrownBy(
            () ->
                nolock.transaction(
                    tx ->
                        BoundTransactions.call(
                            dataSource,
                            tx.dsl(),
                            () -> {
                              jdbc.update("insert into bound_writes values (1)");
                              requiresNew.executeWithoutResult(
                                  status -> jdbc.update("insert into bound_writes values (2)"));
                              return null;
                            })))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("REQUIRES_NEW");
    assertThat(rows()).isZero();
  }

  /** The control: the same REQUIRES_NEW in a Spring transaction commits apart from it. */
  @Test
  void theControlARequiresNewInsideSpringsOwnTransactionCommitsApart() {
    TransactionTemplate outer =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    TransactionTemplate requiresNew =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    requiresNew.setPropagationBehavior(TransactionTemplate.PROPAGATION_REQUIRES_NEW);
    assertThatThrownBy(
            () ->
                outer.executeWithoutResult(
                    status -> {
                      requiresNew.executeWithoutResult(
                          inner -> jdbc.update("insert into bound_writes values (2)"));
                      throw new IllegalStateException("the outer fails");
                    }))
        .hasMessage("the outer fails");
    assertThat(rows()).isOne();
  }

  @Test
  void aResourceThatCommitsWithTheTransactionWaitsForTheCallersWord() {
    AtomicBoolean committedCallback = new AtomicBoolean();
    List<TransactionSynchronization> kept = new ArrayList<>();
    nolock.transaction(
        tx ->
            BoundTransactions.call(
                dataSource,
                tx.dsl(),
                () -> {
                  // As a transactional Kafka producer or a transacted JMS session registers.
                  TransactionSynchronizationManager.registerSynchronization(
                      new org.springframework.transaction.support.ResourceHolderSynchronization<
                          org.springframework.transaction.support.ResourceHolderSupport, Object>(
                          new org.springframework.transaction.support.ResourceHolderSupport() {},
                          new Object()) {
                        @Override
                        protected boolean shouldReleaseBeforeCompletion() {
                          return false; // as Spring Kafka's: the commit happens after it
                        }

                        @Override
                        protected void processResourceAfterCommit(
                            org.springframework.transaction.support.ResourceHolderSupport holder) {
                          committedCallback.set(true);
                        }
                      });
                  return null;
                },
                kept));
    assertThat(kept).hasSize(1);
    assertThat(committedCallback).as("not completed before nolock's commit").isFalse();
    BoundTransactions.afterCommit(kept);
    assertThat(committedCallback).isTrue();
  }

  private static TransactionSynchronization afterCommitSets(AtomicBoolean flag) {
    return new TransactionSynchronization() {
      @Override
      public void afterCommit() {
        flag.set(true);
      }
    };
  }

  @Test
  void aSpringTransactionAlreadyOnTheThreadIsRefusedBeforeTheCodeRuns() {
    TransactionTemplate outer =
        new TransactionTemplate(new DataSourceTransactionManager(dataSource));
    outer.executeWithoutResult(
        status ->
            assertThatThrownBy(
                    () ->
                        nolock.transaction(
                            tx ->
                                BoundTransactions.call(
                                    dataSource,
                                    tx.dsl(),
                                    () -> jdbc.update("insert into bound_writes values (1)"))))
                .isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("remove @Transactional"));
    assertThat(rows()).isZero();
  }
}
