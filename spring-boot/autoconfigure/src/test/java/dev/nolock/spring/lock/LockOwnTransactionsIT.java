package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import javax.sql.DataSource;
import org.jooq.Record;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The lock's acquire, renew and release never join the caller's transaction: called inside a Spring
 * transaction that then rolls back, each stays committed, and the caller's own write rolls back
 * untouched. The application's {@code DataSource} here is a {@link
 * TransactionAwareDataSourceProxy}, the case where a backend on it would join the transaction.
 */
@ExtendWith(PostgresExtension.class)
class LockOwnTransactionsIT {

  private static final String LOCK = "invoice-42";

  private final PostgresSchema schema;

  LockOwnTransactionsIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeEach
  void tables() {
    schema.dsl().execute("drop table if exists t");
    schema.dsl().execute("create table t (v int)");
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    schema.dsl().execute("delete from nolock_locks");
  }

  private ApplicationContextRunner runner() {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                DataSourceTransactionManagerAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockLockAutoConfiguration.class))
        .withBean(DataSource.class, () -> new TransactionAwareDataSourceProxy(schema.dataSource()))
        .withPropertyValues("nolock.lock.backend=postgres", "nolock.lock.purpose=correctness");
  }

  @Test
  void acquireRenewAndReleaseStayCommittedWhenTheCallersTransactionRollsBack() {
    runner()
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              FencedLock lock = context.getBean(FencedLock.class);
              TransactionTemplate template =
                  new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
              JdbcTemplate jdbc = new JdbcTemplate(context.getBean(DataSource.class));
              HeldLock[] held = new HeldLock[1];

              assertThatThrownBy(
                      () ->
                          template.executeWithoutResult(
                              status -> {
                                jdbc.update("insert into t values (1)");
                                held[0] = lock.tryAcquire(LOCK, Duration.ofSeconds(30)).get();
                                assertThat(grantSeenFromAnotherConnection()).isNotNull();
                                held[0].extend(Duration.ofMinutes(5));
                                throw new IllegalStateException("the caller fails");
                              }))
                  .hasMessage("the caller fails");

              assertThat(rowsOfT()).isZero();
              Record grant = grantSeenFromAnotherConnection();
              assertThat(grant).isNotNull();
              assertThat(grant.get("owner", String.class)).isEqualTo(held[0].owner());
              assertThat(grant.get("token", Long.class)).isEqualTo(held[0].token().value());
              assertThat(grant.get("left", Long.class))
                  .as("the renewal to 5 minutes stayed committed")
                  .isGreaterThan(Duration.ofMinutes(4).toSeconds());

              ReleaseOutcome[] outcome = new ReleaseOutcome[1];
              assertThatThrownBy(
                      () ->
                          template.executeWithoutResult(
                              status -> {
                                jdbc.update("insert into t values (2)");
                                outcome[0] = held[0].release();
                                throw new IllegalStateException("the caller fails again");
                              }))
                  .hasMessage("the caller fails again");

              assertThat(outcome[0]).isInstanceOf(ReleaseOutcome.Released.class);
              assertThat(rowsOfT()).isZero();
              assertThat(grantSeenFromAnotherConnection().get("left", Long.class))
                  .as("the release stayed committed")
                  .isLessThanOrEqualTo(0L);
              assertThat(lock.tryAcquire(LOCK, Duration.ofSeconds(30)).isDefined())
                  .as("the lock is free for the next holder")
                  .isTrue();
            });
  }

  /**
   * Negative control: the same backend on the transaction-aware proxy runs its acquire on the
   * caller's connection, and its commit (the backend commits its own statement on a connection with
   * autocommit off) commits the caller's write made before it: the caller's rollback no longer
   * undoes it.
   */
  @Test
  void aBackendOnTheTransactionAwareProxyCommitsTheCallersTransaction() {
    DataSource proxy = new TransactionAwareDataSourceProxy(schema.dataSource());
    LockBackend joining = PostgresLockBackend.create(proxy);
    TransactionTemplate template =
        new TransactionTemplate(new DataSourceTransactionManager(schema.dataSource()));
    JdbcTemplate jdbc = new JdbcTemplate(proxy);
    try (FencedLock lock =
        FencedLock.create(joining, LockConfig.custom(LockPurpose.CORRECTNESS).build())) {
      assertThatThrownBy(
              () ->
                  template.executeWithoutResult(
                      status -> {
                        jdbc.update("insert into t values (1)");
                        assertThat(lock.tryAcquire(LOCK, Duration.ofSeconds(30)).isDefined())
                            .isTrue();
                        throw new IllegalStateException("the caller fails");
                      }))
          .hasMessage("the caller fails");
      assertThat(rowsOfT()).as("the caller's write escaped its rollback").isEqualTo(1);
    }
  }

  private Record grantSeenFromAnotherConnection() {
    return schema
        .dsl()
        .fetchOne(
            "select owner, token, extract(epoch from expires_at - clock_timestamp())::bigint as"
                + " left from nolock_locks where name = ?",
            LOCK);
  }

  private int rowsOfT() {
    return schema.dsl().fetchCount(DSL.table("t"));
  }
}
