package dev.nolock.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.jooq.DSLContext;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.transaction.support.TransactionTemplate;

/** {@link NolockTransactions} joins the Spring transaction of the calling thread, or refuses. */
@ExtendWith(PostgresExtension.class)
class NolockTransactionsIT {

  private final PostgresSchema schema;
  private final NolockTransactions transactions;
  private final TransactionTemplate template;

  NolockTransactionsIT(PostgresSchema schema) {
    this.schema = schema;
    this.transactions = new NolockTransactions(schema.dataSource());
    this.template = new TransactionTemplate(new DataSourceTransactionManager(schema.dataSource()));
  }

  @BeforeEach
  void table() {
    schema.dsl().execute("drop table if exists t");
    schema.dsl().execute("create table t (v int)");
  }

  @Test
  void aStatementOnTheCurrentContextRollsBackWithTheCallersTransaction() {
    assertThatThrownBy(
            () ->
                template.executeWithoutResult(
                    status -> {
                      insertOn(transactions.current());
                      throw new IllegalStateException("the caller fails after its write");
                    }))
        .hasMessage("the caller fails after its write");
    assertThat(rows()).isZero();

    template.executeWithoutResult(status -> insertOn(transactions.current()));
    assertThat(rows()).isEqualTo(1);
  }

  /** Negative control: a context over the plain pool inside the same transaction commits alone. */
  @Test
  void aContextOverThePlainPoolCommitsDespiteTheRollback() {
    DSLContext plain = DSL.using(schema.dataSource(), org.jooq.SQLDialect.POSTGRES);
    assertThatThrownBy(
            () ->
                template.executeWithoutResult(
                    status -> {
                      insertOn(plain);
                      throw new IllegalStateException("the caller fails after its write");
                    }))
        .hasMessage("the caller fails after its write");
    assertThat(rows()).isEqualTo(1);
  }

  @Test
  void outsideATransactionTheContextIsRefused() {
    assertThatThrownBy(transactions::current)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("No Spring-managed transaction is active")
        .hasMessageContaining("@Transactional");
  }

  @Test
  void aReadOnlyTransactionIsRefused() {
    TransactionTemplate readOnly = new TransactionTemplate(template.getTransactionManager());
    readOnly.setReadOnly(true);
    assertThatThrownBy(() -> readOnly.executeWithoutResult(status -> transactions.current()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("read-only");
  }

  @Test
  void aTransactionOfAnotherDataSourceIsRefused() {
    TransactionTemplate other =
        new TransactionTemplate(
            new DataSourceTransactionManager(new DriverManagerDataSource(schema.jdbcUrl())));
    assertThatThrownBy(() -> other.executeWithoutResult(status -> transactions.current()))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("not on nolock's DataSource");
  }

  /**
   * Negative control: what {@code current()} would hand out there, a connection of nolock's
   * DataSource in autocommit mode, commits a write although the caller's transaction rolls back.
   */
  @Test
  void theControlTheConnectionSpringHandsOutThereCommitsAlone() {
    TransactionTemplate other =
        new TransactionTemplate(
            new DataSourceTransactionManager(new DriverManagerDataSource(schema.jdbcUrl())));
    assertThatThrownBy(
            () ->
                other.executeWithoutResult(
                    status -> {
                      insertOn(
                          DSL.using(
                              DataSourceUtils.getConnection(schema.dataSource()),
                              org.jooq.SQLDialect.POSTGRES));
                      throw new IllegalStateException("the caller fails after its write");
                    }))
        .hasMessage("the caller fails after its write");
    assertThat(rows()).isEqualTo(1);
  }

  private static void insertOn(DSLContext dsl) {
    dsl.execute("insert into t values (1)");
  }

  private int rows() {
    return schema.dsl().fetchCount(DSL.table("t"));
  }
}
