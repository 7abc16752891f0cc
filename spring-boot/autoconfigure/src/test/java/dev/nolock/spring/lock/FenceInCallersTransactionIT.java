package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.spring.NolockTransactions;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockFenceAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.time.Duration;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * {@code fence.write(nolockTransactions.current(), lease, writes)} joins the Spring transaction
 * (Boot's {@link DataSourceTransactionManager}): the data write and the fence's advance roll back
 * together when the caller throws after it, and commit together otherwise; a stale lease is refused
 * as a value, with nothing written.
 */
@ExtendWith(PostgresExtension.class)
class FenceInCallersTransactionIT {

  private final PostgresSchema schema;

  FenceInCallersTransactionIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeEach
  void tables() {
    schema.dsl().execute("drop table if exists invoices");
    schema.dsl().execute("create table invoices (id int primary key, status text)");
    schema.dsl().execute("insert into invoices values (42, 'open')");
  }

  private ApplicationContextRunner runner() {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                DataSourceTransactionManagerAutoConfiguration.class,
                NolockAutoConfiguration.class,
                NolockLockAutoConfiguration.class,
                NolockFenceAutoConfiguration.class))
        .withPropertyValues(
            "spring.datasource.url=" + schema.jdbcUrl(),
            "nolock.create-tables=true",
            "nolock.fence.table=billing_fences",
            "nolock.lock.backend=postgres",
            "nolock.lock.purpose=correctness");
  }

  @Test
  void theFencedWriteAndTheFenceAdvanceRollBackAndCommitWithTheCallersTransaction() {
    runner()
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              Fence fence = context.getBean(Fence.class);
              NolockTransactions transactions = context.getBean(NolockTransactions.class);
              TransactionTemplate template =
                  new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
              FencedLock lock = context.getBean(FencedLock.class);
              HeldLock held = lock.tryAcquire("invoice-42", Duration.ofSeconds(30)).get();

              assertThatThrownBy(
                      () ->
                          template.executeWithoutResult(
                              status -> {
                                Either<FenceRejection, Integer> written =
                                    fence.write(
                                        transactions.current(), held.lease(), tx -> charge(tx));
                                assertThat(written.get()).isEqualTo(1);
                                throw new IllegalStateException("the caller fails after it");
                              }))
                  .hasMessage("the caller fails after it");
              assertThat(status()).isEqualTo("open");
              assertThat(fenceRows()).as("the fence's advance rolled back too").isZero();

              template.executeWithoutResult(
                  status ->
                      assertThat(
                              fence
                                  .write(transactions.current(), held.lease(), tx -> charge(tx))
                                  .get())
                          .isEqualTo(1));
              assertThat(status()).isEqualTo("charged");
              assertThat(fenceToken()).isEqualTo(held.token().value());
            });
  }

  /** Negative control: a lease the fence has seen superseded is refused, and nothing is written. */
  @Test
  void aStaleLeaseIsRefusedAsAValueAndWritesNothing() {
    runner()
        .run(
            context -> {
              Fence fence = context.getBean(Fence.class);
              NolockTransactions transactions = context.getBean(NolockTransactions.class);
              TransactionTemplate template =
                  new TransactionTemplate(context.getBean(PlatformTransactionManager.class));
              FencedLock lock = context.getBean(FencedLock.class);
              HeldLock stale = lock.tryAcquire("invoice-42", Duration.ofSeconds(30)).get();
              stale.release();
              HeldLock newer = lock.tryAcquire("invoice-42", Duration.ofSeconds(30)).get();
              assertThat(newer.token().value()).isGreaterThan(stale.token().value());
              template.executeWithoutResult(
                  status ->
                      fence.write(
                          transactions.current(),
                          newer.lease(),
                          tx -> tx.execute("update invoices set status = 'newer' where id = 42")));

              Either<FenceRejection, Integer> refused =
                  template.execute(
                      status ->
                          fence.write(transactions.current(), stale.lease(), tx -> charge(tx)));

              assertThat(refused.isLeft()).isTrue();
              assertThat(refused.getLeft().currentToken().value()).isEqualTo(newer.token().value());
              assertThat(status()).isEqualTo("newer");
            });
  }

  private static int charge(org.jooq.DSLContext tx) {
    return tx.execute("update invoices set status = 'charged' where id = 42");
  }

  private String status() {
    return schema.dsl().fetchOne("select status from invoices where id = 42").get(0, String.class);
  }

  private int fenceRows() {
    return schema.dsl().fetchCount(DSL.table("billing_fences"));
  }

  private long fenceToken() {
    return schema.dsl().fetchOne("select token from billing_fences").get(0, Long.class);
  }
}
