package dev.nolock.spring.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.NolockTransactions;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The queue's two kinds of path in a Spring transaction (DataSourceTransactionManager): enqueue and
 * complete on {@link NolockTransactions#current()} commit or roll back with the caller; claim,
 * heartbeat and reap on the queue the starter built commit on their own, whatever the caller does.
 */
@ExtendWith(PostgresExtension.class)
class QueueTransactionsIT {

  private static final String FAILS = "the caller fails after its writes";

  private final PostgresSchema schema;
  private final ApplicationContextRunner runner;

  QueueTransactionsIT(PostgresSchema schema) {
    this.schema = schema;
    this.runner =
        new ApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class,
                    TransactionAutoConfiguration.class,
                    NolockAutoConfiguration.class,
                    NolockQueueAutoConfiguration.class))
            .withPropertyValues(
                "spring.datasource.url=" + schema.jdbcUrl(),
                "nolock.create-tables=true",
                "nolock.queue.queues.receipts.lease=1s");
  }

  @BeforeEach
  void tables() {
    schema.dsl().execute("drop table if exists nolock_jobs");
    schema.dsl().execute("drop table if exists orders");
    schema.dsl().execute("create table orders (id int)");
  }

  @Test
  void anEnqueueInTheCallersTransactionRollsBackAndCommitsWithIt() {
    runner.run(
        context -> {
          assertThat(context.getBean(TransactionTemplate.class).getTransactionManager())
              .isInstanceOf(DataSourceTransactionManager.class);
          JobQueue<String> queue = receipts(context);
          NolockTransactions tx = context.getBean(NolockTransactions.class);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            order(tx.current());
                            queue.enqueue(tx.current(), NewJob.of("receipt 1"));
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(jobs()).isZero();
          assertThat(orders()).isZero();

          inTransaction(
              context,
              () -> {
                order(tx.current());
                queue.enqueue(tx.current(), NewJob.of("receipt 1"));
              });
          assertThat(jobs()).isEqualTo(1);
          assertThat(orders()).isEqualTo(1);
        });
  }

  /** Negative control: an enqueue on a plain context over the pool commits despite the rollback. */
  @Test
  void anEnqueueOnAPlainContextCommitsDespiteTheRollback() {
    runner.run(
        context -> {
          JobQueue<String> queue = receipts(context);
          DSLContext plain = DSL.using(context.getBean(DataSource.class), SQLDialect.POSTGRES);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            plain.transaction(
                                cfg -> queue.enqueue(cfg.dsl(), NewJob.of("receipt 1")));
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(jobs()).isEqualTo(1);
        });
  }

  @Test
  void aCompletionInTheCallersTransactionRollsBackAndCommitsWithIt() {
    runner.run(
        context -> {
          JobQueue<String> queue = receipts(context);
          NolockTransactions tx = context.getBean(NolockTransactions.class);
          queue.enqueue(NewJob.of("receipt 1"));
          Job<String> job = queue.claim(1).get(0);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            order(tx.current());
                            assertThat(queue.complete(tx.current(), job).isRight()).isTrue();
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(state(job)).isEqualTo("running");
          assertThat(orders()).isZero();

          inTransaction(
              context,
              () -> {
                order(tx.current());
                assertThat(queue.complete(tx.current(), job).isRight()).isTrue();
              });
          assertThat(state(job)).isEqualTo("done");
          assertThat(orders()).isEqualTo(1);
        });
  }

  @Test
  void claimHeartbeatAndReapInsideARolledBackTransactionStayCommitted() {
    runner.run(this::claimHeartbeatAndReapStayCommitted);
  }

  /**
   * The application's DataSource is itself a TransactionAwareDataSourceProxy: the starter's queue
   * must still take connections of its own.
   */
  @Test
  void theyStayCommittedWhenTheApplicationsDataSourceIsATransactionAwareProxy() {
    runner
        .withBean(
            DataSource.class,
            () -> {
              HikariDataSource pool = new HikariDataSource();
              pool.setJdbcUrl(schema.jdbcUrl());
              return new TransactionAwareDataSourceProxy(pool);
            })
        .run(
            context -> {
              assertThat(context.getBean(DataSource.class))
                  .isInstanceOf(TransactionAwareDataSourceProxy.class);
              claimHeartbeatAndReapStayCommitted(context);
              ((HikariDataSource)
                      ((TransactionAwareDataSourceProxy) context.getBean(DataSource.class))
                          .getTargetDataSource())
                  .close();
            });
  }

  private void claimHeartbeatAndReapStayCommitted(AssertableApplicationContext context) {
    JobQueue<String> queue = receipts(context);
    NolockTransactions tx = context.getBean(NolockTransactions.class);
    queue.enqueue(NewJob.of("receipt 1"));
    Job<String> claimed = claimAndHeartbeatThenFail(context, queue, tx);
    assertThat(state(claimed)).isEqualTo("running");
    assertThat(attempt(claimed)).isEqualTo(1);
    assertThat(
            schema
                .dsl()
                .fetchValue(
                    "select locked_until > ? from nolock_jobs where id = ?",
                    java.sql.Timestamp.from(claimed.lockedUntil()),
                    claimed.id()))
        .as("the heartbeat's lease, committed although the caller rolled back")
        .isEqualTo(true);
    assertThat(orders()).as("the caller's own write, rolled back").isZero();

    awaitLeaseExpired(claimed);
    assertThatThrownBy(
            () ->
                inTransaction(
                    context,
                    () -> {
                      order(tx.current());
                      assertThat(queue.reapExpired().toString()).isNotEmpty();
                      throw new IllegalStateException(FAILS);
                    }))
        .hasMessage(FAILS);
    assertThat(state(claimed)).as("reaped, committed").isEqualTo("ready");
    assertThat(orders()).isZero();
  }

  /**
   * Negative control: the same claim through a queue on a TransactionAwareDataSourceProxy runs on
   * the caller's connection, and the claim's own COMMIT commits the caller's write made before it,
   * which the caller then rolls back in vain: the "outer write rolled back" assertion above catches
   * a queue built without {@code OwnConnections}.
   */
  @Test
  void aClaimThroughATransactionAwareProxyCommitsTheCallersWrite() {
    runner.run(
        context -> {
          JobQueue<String> starters = receipts(context);
          JobQueue<String> joined =
              JobQueue.create(
                  new TransactionAwareDataSourceProxy(context.getBean(DataSource.class)),
                  starters.config(),
                  PayloadCodec.utf8());
          NolockTransactions tx = context.getBean(NolockTransactions.class);
          starters.enqueue(NewJob.of("receipt 1"));
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            order(tx.current());
                            assertThat(joined.claim(1)).hasSize(1);
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(orders()).as("the caller's write, committed by the claim").isEqualTo(1);
        });
  }

  private Job<String> claimAndHeartbeatThenFail(
      AssertableApplicationContext context, JobQueue<String> queue, NolockTransactions tx) {
    AtomicReference<Job<String>> claimed = new AtomicReference<>();
    assertThatThrownBy(
            () ->
                inTransaction(
                    context,
                    () -> {
                      order(tx.current());
                      List<Job<String>> jobs = queue.claim(1);
                      assertThat(jobs).hasSize(1);
                      claimed.set(jobs.get(0));
                      assertThat(queue.heartbeat(jobs.get(0)).isRight()).isTrue();
                      throw new IllegalStateException(FAILS);
                    }))
        .hasMessage(FAILS);
    return claimed.get();
  }

  private void awaitLeaseExpired(Job<String> job) {
    await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                Boolean.TRUE.equals(
                    schema
                        .dsl()
                        .fetchValue(
                            "select locked_until < clock_timestamp() from nolock_jobs where id = ?",
                            job.id())));
  }

  private static JobQueue<String> receipts(AssertableApplicationContext context) {
    assertThat(context).hasNotFailed();
    return context.getBean(JobQueues.class).queue("receipts", String.class);
  }

  private static void inTransaction(AssertableApplicationContext context, Runnable work) {
    context.getBean(TransactionTemplate.class).executeWithoutResult(status -> work.run());
  }

  private static void order(DSLContext tx) {
    tx.execute("insert into orders values (1)");
  }

  private int jobs() {
    return schema.dsl().fetchCount(DSL.table("nolock_jobs"));
  }

  private int orders() {
    return schema.dsl().fetchCount(DSL.table("orders"));
  }

  private String state(Job<?> job) {
    return schema
        .dsl()
        .fetchValue("select state from nolock_jobs where id = ?", job.id())
        .toString();
  }

  private long attempt(Job<?> job) {
    return ((Number)
            schema.dsl().fetchValue("select attempt from nolock_jobs where id = ?", job.id()))
        .longValue();
  }
}
