package dev.nolock.cas;

import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.VersionedStoreLostAnswerContract;
import java.util.function.Predicate;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The shared lost-answer contract against the real PostgreSQL: the store under test runs on a pool
 * whose statements {@link JdbcFaults} executes and then drops the answer of (or drops before the
 * server sees them). The paths only this store has (a batch, a pool with autocommit off, the
 * caller's transaction, {@code update}'s read and its lost race) are in {@code LostAnswerIT}.
 */
@ExtendWith(PostgresExtension.class)
class VersionColumnStoreLostAnswerIT extends VersionedStoreLostAnswerContract {

  private final JdbcFaults faults;
  private final VersionColumnStore<String, Long> healthy;
  private final VersionColumnStore<String, Long> faulty;

  VersionColumnStoreLostAnswerIT(PostgresSchema schema) {
    this.faults = JdbcFaults.pool(schema.jdbcUrl());
    this.healthy = store(schema.dataSource());
    this.faulty = store(faults.dataSource());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  @AfterEach
  void closePool() {
    faults.close();
  }

  private static VersionColumnStore<String, Long> store(DataSource dataSource) {
    return Tables.counterStore(dataSource);
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return healthy;
  }

  @Override
  protected VersionedStore<String, Long> faultyStore() {
    return faulty;
  }

  @Override
  protected InjectedFault inject(Operation operation, FaultKind kind) {
    return faults.onNextStatement(kind, statement(operation));
  }

  @Override
  protected InjectedFault inject(Operation operation, FaultKind kind, Runnable meanwhile) {
    return faults.onNextStatement(kind, statement(operation), meanwhile);
  }

  /** Each write is one statement in autocommit: its answer lost, it has committed. */
  private static Predicate<String> statement(Operation operation) {
    return switch (operation) {
      case INSERT -> JdbcFaults.sqlContaining("insert into \"counters\"");
      case COMPARE_AND_SET, UPDATE -> JdbcFaults.sqlContaining("update \"counters\" set");
      case DELETE -> JdbcFaults.sqlContaining("delete from \"counters\"");
    };
  }
}
