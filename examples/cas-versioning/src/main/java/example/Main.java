package example;

import dev.nolock.cas.ValueCodec;
import dev.nolock.cas.VersionColumnStore;
import dev.nolock.cas.VersionColumnStoreConfig;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Versioned;
import io.vavr.control.Either;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** A stale compare-and-set is refused, and concurrent read-modify-writes lose no update. */
public final class Main {

  public static void main(String[] args) throws Exception {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSL.using(pool, SQLDialect.POSTGRES)
        .execute(
            "CREATE TABLE accounts (id text PRIMARY KEY, version bigint NOT NULL DEFAULT 1,"
                + " balance bigint NOT NULL)");

    VersionColumnStore<String, Long> accounts =
        VersionColumnStore.create(
            pool,
            VersionColumnStoreConfig.custom("accounts", String.class, ValueCodec.longs())
                .valueColumn("balance") // key column "id" and version column "version": defaults
                .build());
    accounts.insert("alice", 100L);

    // Two clients read the same version; the first write wins, the second is refused.
    Versioned<Long> seen = accounts.read("alice").get();
    Either<Conflict, Versioned<Long>> first = accounts.compareAndSet("alice", seen.version(), 70L);
    Either<Conflict, Versioned<Long>> second = accounts.compareAndSet("alice", seen.version(), 90L);
    check(first.isRight(), "the first compare-and-set was refused: " + first);
    check(second.isLeft(), "the second compare-and-set, on a stale version, went through");
    System.out.println("stale write refused: " + second.getLeft());

    // Eight threads add 1 twenty-five times each: read, apply, compare-and-set, retried on a
    // lost race. Every update that reports success is in the balance; none is lost.
    ExecutorService threads = Executors.newFixedThreadPool(8);
    List<Future<Either<Conflict, Versioned<Long>>>> updates = new ArrayList<>();
    for (int i = 0; i < 200; i++) {
      updates.add(threads.submit(() -> accounts.update("alice", balance -> balance + 1)));
    }
    int applied = 0;
    for (Future<Either<Conflict, Versioned<Long>>> update : updates) {
      applied += update.get().isRight() ? 1 : 0; // a Left: gave up after the retry policy
    }
    threads.shutdown();
    long balance = accounts.read("alice").get().value();
    System.out.println(applied + " of 200 concurrent updates applied, balance " + balance);
    check(balance == 70 + applied, "lost updates: the balance is " + balance);
    check(applied > 0, "no concurrent update got through");

    DSL.using(pool, SQLDialect.POSTGRES).execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: the stale write was refused and no update was lost");
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
