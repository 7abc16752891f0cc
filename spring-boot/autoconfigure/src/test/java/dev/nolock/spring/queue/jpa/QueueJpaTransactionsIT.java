package dev.nolock.spring.queue.jpa;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.NolockTransactions;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockQueueAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import jakarta.persistence.EntityManager;
import jakarta.persistence.EntityManagerFactory;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.hibernate.autoconfigure.HibernateJpaAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceTransactionManagerAutoConfiguration;
import org.springframework.boot.persistence.autoconfigure.EntityScan;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.transaction.autoconfigure.TransactionAutoConfiguration;
import org.springframework.context.annotation.Configuration;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.orm.jpa.SharedEntityManagerCreator;
import org.springframework.transaction.support.TransactionTemplate;

/**
 * The caller's-transaction paths under Boot's JPA auto-configuration (Hibernate, {@link
 * JpaTransactionManager}): the job and an entity written in the same transaction roll back and
 * commit together.
 */
@ExtendWith(PostgresExtension.class)
class QueueJpaTransactionsIT {

  private static final String FAILS = "the caller fails after its writes";

  private final PostgresSchema schema;
  private final ApplicationContextRunner runner;

  QueueJpaTransactionsIT(PostgresSchema schema) {
    this.schema = schema;
    this.runner =
        new ApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    DataSourceAutoConfiguration.class,
                    HibernateJpaAutoConfiguration.class,
                    DataSourceTransactionManagerAutoConfiguration.class,
                    TransactionAutoConfiguration.class,
                    NolockAutoConfiguration.class,
                    NolockQueueAutoConfiguration.class))
            .withUserConfiguration(Entities.class)
            .withPropertyValues(
                "spring.datasource.url=" + schema.jdbcUrl(),
                "spring.jpa.hibernate.ddl-auto=create",
                "nolock.create-tables=true");
  }

  @BeforeEach
  void tables() {
    schema.dsl().execute("drop table if exists nolock_jobs");
    schema.dsl().execute("drop table if exists jpa_orders");
  }

  @Test
  void anEnqueueRollsBackAndCommitsWithTheEntity() {
    runner.run(
        context -> {
          assertThat(context).hasNotFailed();
          assertThat(context.getBean(TransactionTemplate.class).getTransactionManager())
              .isInstanceOf(JpaTransactionManager.class);
          JobQueue<String> queue = context.getBean(JobQueues.class).queue("receipts", String.class);
          NolockTransactions tx = context.getBean(NolockTransactions.class);
          EntityManager em = entityManager(context);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            em.persist(new JpaOrder(1));
                            em.flush();
                            queue.enqueue(tx.current(), NewJob.of("receipt 1"));
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(count("nolock_jobs")).isZero();
          assertThat(count("jpa_orders")).isZero();

          inTransaction(
              context,
              () -> {
                em.persist(new JpaOrder(1));
                queue.enqueue(tx.current(), NewJob.of("receipt 1"));
              });
          assertThat(count("nolock_jobs")).isEqualTo(1);
          assertThat(count("jpa_orders")).isEqualTo(1);
        });
  }

  /** Negative control: an enqueue on a plain context over the pool commits despite the rollback. */
  @Test
  void anEnqueueOnAPlainContextCommitsDespiteTheRollback() {
    runner.run(
        context -> {
          JobQueue<String> queue = context.getBean(JobQueues.class).queue("receipts", String.class);
          DSLContext plain = DSL.using(context.getBean(DataSource.class), SQLDialect.POSTGRES);
          EntityManager em = entityManager(context);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            em.persist(new JpaOrder(1));
                            em.flush();
                            plain.transaction(
                                cfg -> queue.enqueue(cfg.dsl(), NewJob.of("receipt 1")));
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(count("nolock_jobs")).isEqualTo(1);
          assertThat(count("jpa_orders")).isZero();
        });
  }

  @Test
  void aCompletionRollsBackAndCommitsWithTheEntity() {
    runner.run(
        context -> {
          JobQueue<String> queue = context.getBean(JobQueues.class).queue("receipts", String.class);
          NolockTransactions tx = context.getBean(NolockTransactions.class);
          EntityManager em = entityManager(context);
          queue.enqueue(NewJob.of("receipt 1"));
          Job<String> job = queue.claim(1).get(0);
          assertThatThrownBy(
                  () ->
                      inTransaction(
                          context,
                          () -> {
                            em.persist(new JpaOrder(1));
                            em.flush();
                            assertThat(queue.complete(tx.current(), job).isRight()).isTrue();
                            throw new IllegalStateException(FAILS);
                          }))
              .hasMessage(FAILS);
          assertThat(state(job)).isEqualTo("running");
          assertThat(count("jpa_orders")).isZero();

          inTransaction(
              context,
              () -> {
                em.persist(new JpaOrder(1));
                assertThat(queue.complete(tx.current(), job).isRight()).isTrue();
              });
          assertThat(state(job)).isEqualTo("done");
          assertThat(count("jpa_orders")).isEqualTo(1);
        });
  }

  private static EntityManager entityManager(AssertableApplicationContext context) {
    return SharedEntityManagerCreator.createSharedEntityManager(
        context.getBean(EntityManagerFactory.class));
  }

  private static void inTransaction(AssertableApplicationContext context, Runnable work) {
    context.getBean(TransactionTemplate.class).executeWithoutResult(status -> work.run());
  }

  private int count(String table) {
    return schema.dsl().fetchCount(DSL.table(table));
  }

  private String state(Job<?> job) {
    return schema
        .dsl()
        .fetchValue("select state from nolock_jobs where id = ?", job.id())
        .toString();
  }

  @Configuration(proxyBeanMethods = false)
  @EntityScan(basePackageClasses = JpaOrder.class)
  static class Entities {}
}
