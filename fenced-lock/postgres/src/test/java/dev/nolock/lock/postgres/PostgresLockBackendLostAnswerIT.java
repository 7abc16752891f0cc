package dev.nolock.lock.postgres;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.util.Locale;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lost-answer contract against the real PostgreSQL: each call's one autocommit statement is
 * executed with its answer lost, or lost before the server sees it, by {@link JdbcFaults} below the
 * pool. pgjdbc never resends, so every fault must come back as "outcome unknown".
 */
@ExtendWith(PostgresExtension.class)
class PostgresLockBackendLostAnswerIT extends LockBackendLostAnswerContract {

  private final PostgresLockBackend backend;
  private final JdbcFaults faults;
  private final PostgresLockBackend faulty;
  private final LockRows rows;

  PostgresLockBackendLostAnswerIT(PostgresSchema schema) {
    this.backend = PostgresLockBackend.create(schema.dataSource());
    this.faults = JdbcFaults.pool(schema.jdbcUrl());
    this.faulty = PostgresLockBackend.create(faults.dataSource());
    this.rows = new LockRows(schema.dataSource(), PostgresLockConfig.DEFAULT_TABLE);
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  @AfterEach
  void closePool() {
    faults.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return rows.peek(name);
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return faults.onNextStatement(kind, statementOf(op), meanwhile);
  }

  /** The one statement of each call (see {@link PostgresLockBackend}'s algorithm). */
  private static Predicate<String> statementOf(Operation op) {
    String table = PostgresLockConfig.DEFAULT_TABLE;
    return switch (op) {
      case ACQUIRE ->
          named(
              "the insert into " + table,
              sql -> sql.startsWith("insert into") && sql.contains(table));
      // Renew sets clock_timestamp() + the TTL; release sets clock_timestamp() alone, inside the
      // WITH that announces it.
      case RENEW ->
          named(
              "the update of " + table + " with a TTL",
              sql -> sql.startsWith("update") && sql.contains(table) && sql.contains("interval"));
      case RELEASE ->
          named(
              "the update of " + table + " without a TTL",
              sql ->
                  sql.startsWith("with r as (update")
                      && sql.contains(table)
                      && !sql.contains("interval"));
    };
  }

  private static Predicate<String> named(String what, Predicate<String> lowerCaseSql) {
    return new Predicate<>() {
      @Override
      public boolean test(String sql) {
        return lowerCaseSql.test(sql.toLowerCase(Locale.ROOT));
      }

      @Override
      public String toString() {
        return what;
      }
    };
  }
}
