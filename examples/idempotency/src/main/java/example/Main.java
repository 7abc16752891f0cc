package example;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.ResultCodec;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** One payment request sent eight times at once, then again: it is paid once and replayed. */
public final class Main {

  public static void main(String[] args) throws Exception {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.execute("CREATE TABLE payments (idem_key text PRIMARY KEY, cents bigint NOT NULL)");

    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            pool,
            IdempotencyConfig.custom()
                .lease(Duration.ofSeconds(30)) // longer than the slowest action
                .retention(Duration.ofHours(24))
                .build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();

    String idempotencyKey = UUID.randomUUID().toString(); // what the client sends
    String body = "{\"cents\":500}";
    ExecutorService clients = Executors.newFixedThreadPool(8);
    List<Future<Outcome<String>>> retries = new ArrayList<>();
    for (int i = 0; i < 8; i++) { // a client that retries, or a proxy that resends
      retries.add(clients.submit(() -> pay(keys, idempotencyKey, body)));
    }
    int completed = 0;
    for (Future<Outcome<String>> retry : retries) {
      Outcome<String> outcome = retry.get();
      System.out.println("concurrent request: " + outcome);
      completed += outcome instanceof Outcome.Completed<String> ? 1 : 0;
    }
    clients.shutdown();
    check(completed == 1, completed + " of the concurrent requests ran the payment");

    // Once it has completed, the same request gets the stored result without running again.
    Outcome<String> later = pay(keys, idempotencyKey, body);
    System.out.println("the same request later: " + later);
    check(
        later instanceof Outcome.Replayed<String> replay && replay.result().equals("paid 500"),
        "the later request was not replayed: " + later);

    // The same key with another body is another request: refused, not run, not replayed.
    Outcome<String> reused = pay(keys, idempotencyKey, "{\"cents\":9999}");
    System.out.println("the same key, another body: " + reused);
    check(reused instanceof Outcome.KeyReusedWithDifferentRequest<String>, "key reuse: " + reused);

    int payments = dsl.fetchCount(table(name("payments")));
    check(payments == 1, payments + " payments were recorded");
    dsl.execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: paid once, replayed after, a reused key refused");
  }

  private static Outcome<String> pay(IdempotencyKeys<String> keys, String key, String body) {
    return keys.execute(
        "payments.create", // the operation: a metrics tag, never per request
        Caller.of("customer-7"), // who sent it, from your authentication: keys are per caller
        key,
        Fingerprint.sha256("POST", "/payments", body),
        attempt -> {
          // Local effects go through attempt.dsl(): they commit with the stored result, or not
          // at all.
          attempt
              .dsl()
              .insertInto(table(name("payments")), field(name("idem_key")), field(name("cents")))
              .values(attempt.key(), 500L)
              .execute();
          return "paid 500";
        });
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
