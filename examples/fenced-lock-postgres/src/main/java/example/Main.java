package example;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.sql.Fence;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** Two instances pay one invoice under the fenced lock; the first one's late write is refused. */
public final class Main {

  public static void main(String[] args) throws SQLException {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.execute("CREATE TABLE invoices (id int PRIMARY KEY, status text NOT NULL)");
    dsl.execute("INSERT INTO invoices VALUES (42, 'open')");

    PostgresLockBackend backend = PostgresLockBackend.create(pool); // table nolock_locks
    backend.createTableIfMissing();
    Fence fence = Fence.onTable("nolock_fences");
    fence.createTableIfMissing(dsl);

    // Two instances of a service, each with its own lock facade (its own owner identity).
    try (FencedLock first =
            FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
        FencedLock second =
            FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.CORRECTNESS))) {
      AtomicReference<Lease> firstLease = new AtomicReference<>();
      Either<NotAcquired, Either<FenceRejection, Integer>> paid =
          first.withLock(
              "invoice-42",
              Duration.ofSeconds(10), // TTL, renewed by the watchdog every TTL/3
              Duration.ofSeconds(5), // how long to wait for the lock
              held -> {
                Option<HeldLock> meanwhile =
                    second.tryAcquire("invoice-42", Duration.ofSeconds(10));
                check(meanwhile.isEmpty(), "the second instance got the lock the first one holds");
                firstLease.set(held.lease());
                held.checkPointOfNoReturn(Duration.ofMillis(200)); // before every write
                return fence.write(dsl, held.lease(), tx -> setStatus(tx, "paid"));
              });
      check(paid.equals(Either.right(Either.right(1))), "the holder's write failed: " + paid);
      System.out.println("first holder, token " + firstLease.get().token().value() + ": paid");

      // The first holder released; the second takes over and writes with a higher token.
      Either<NotAcquired, Either<FenceRejection, Integer>> refunded =
          second.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(5),
              held -> {
                check(held.token().isNewerThan(firstLease.get().token()), "token not higher");
                System.out.println("second holder, token " + held.token().value() + ": refunded");
                return fence.write(dsl, held.lease(), tx -> setStatus(tx, "refunded"));
              });
      check(refunded.equals(Either.right(Either.right(1))), "the new holder's write failed");

      // A write that arrives late from the first holder (it was paused, say) is refused.
      Either<FenceRejection, Integer> late =
          fence.write(dsl, firstLease.get(), tx -> setStatus(tx, "paid"));
      check(late.isLeft(), "the stale holder's write went through");
      System.out.println("first holder's late write: refused (" + late.getLeft().describe() + ")");
    }
    String status = (String) dsl.fetchValue("SELECT status FROM invoices WHERE id = 42");
    check(status.equals("refunded"), "the invoice is " + status);
    dsl.execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: one holder at a time, and the stale write did not land");
  }

  private static int setStatus(DSLContext tx, String status) {
    return tx.update(table(name("invoices")))
        .set(field(name("status")), status)
        .where(field(name("id")).eq(42))
        .execute();
  }

  /** A schema of this run's own, so that every run starts from empty tables. */
  private static DataSource freshSchema(String url, String schema) throws SQLException {
    try (Connection connection = DriverManager.getConnection(url)) {
      connection.createStatement().execute("CREATE SCHEMA " + schema);
    }
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(url);
    dataSource.setCurrentSchema(schema);
    return dataSource;
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
