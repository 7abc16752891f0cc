package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.postgres.PostgresAdvisoryLock;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.Fence;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Record1;
import org.jooq.Result;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockDataProvider;
import org.jooq.tools.jdbc.MockResult;
import org.junit.jupiter.api.Test;

/**
 * The raw-JDBC floors of {@link PgLockBenchmark} must send what the library sends, or they measure
 * another statement: the SQL jOOQ renders for the fenced write without a write id (the path the
 * benchmark takes), the lock backend's acquire and release, and the advisory lock's statement with
 * its key, are captured through jOOQ's mock connection, no server needed.
 */
class PgLockBenchmarkSqlTest {

  @Test
  void theRawFenceStatementIsTheOneFenceWriteRuns() {
    List<String> sent = new CopyOnWriteArrayList<>();
    MockConnection connection =
        new MockConnection(
            context -> {
              sent.add(context.sql());
              return new MockResult[] {new MockResult(1)};
            });
    Lease lease =
        new Lease(
            "counter-0",
            "bench#0000000000000000",
            FencingToken.of(1),
            Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));

    Fence.onTable(Fence.DEFAULT_TABLE)
        .write(DSL.using(connection, SQLDialect.POSTGRES), lease, tx -> 0);

    assertThat(sent).containsExactly(PgLockBenchmark.FENCE);
  }

  @Test
  void theRawAcquireAndReleaseStatementsAreTheOnesTheBackendSends() {
    List<String> sent = new CopyOnWriteArrayList<>();
    DSLContext mock = DSL.using(SQLDialect.POSTGRES);
    MockDataProvider oneNumber =
        context -> {
          sent.add(context.sql());
          // one row of one number: the acquire's token, the release's freed row
          Field<Long> token = DSL.field("token", Long.class);
          Result<Record1<Long>> row = mock.newResult(token);
          row.add(mock.newRecord(token).values(1L));
          return new MockResult[] {new MockResult(1, row)};
        };
    // a connection per borrow, as a pool hands out: the backend closes each one it borrowed
    DataSource dataSource =
        (DataSource)
            Proxy.newProxyInstance(
                DataSource.class.getClassLoader(),
                new Class<?>[] {DataSource.class},
                (proxy, method, args) -> {
                  if (method.getName().equals("getConnection")) {
                    return new MockConnection(oneNumber);
                  }
                  throw new UnsupportedOperationException(method.getName());
                });
    PostgresLockBackend backend = PostgresLockBackend.create(dataSource);
    String owner = "bench#0000000000000000";

    FencingToken granted = backend.tryAcquire("counter-0", owner, Duration.ofSeconds(10)).get();
    backend.release("counter-0", owner, granted);

    assertThat(sent).containsExactly(PgLockBenchmark.ACQUIRE, PgLockBenchmark.RELEASE);
  }

  @Test
  void theRawAdvisoryLockStatementAndKeyAreTheOnesTheLibrarySends() {
    List<String> sent = new CopyOnWriteArrayList<>();
    List<Object> bound = new CopyOnWriteArrayList<>();
    DSLContext mock = DSL.using(SQLDialect.POSTGRES);
    MockConnection connection =
        new MockConnection(
            context -> {
              sent.add(context.sql());
              bound.addAll(List.of(context.bindings()));
              Field<Boolean> locked = DSL.field("locked", Boolean.class);
              Result<Record1<Boolean>> row = mock.newResult(locked);
              row.add(mock.newRecord(locked).values(true));
              return new MockResult[] {new MockResult(1, row)};
            });

    PostgresAdvisoryLock.tryInTransaction(
        DSL.using(connection, SQLDialect.POSTGRES), "counter-0", tx -> 0);

    assertThat(sent).containsExactly(PgLockBenchmark.TRY_XACT_LOCK);
    assertThat(bound).containsExactly(AdvisoryLockNamespace.LOCK.hashInput("counter-0"));
  }
}
