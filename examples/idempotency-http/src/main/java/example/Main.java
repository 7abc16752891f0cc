package example;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.sun.net.httpserver.HttpServer;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** One POST with one Idempotency-Key sent eight times at once: it runs once, all get its reply. */
public final class Main {

  private static final String USER = "X-User";

  public static void main(String[] args) throws Exception {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSL.using(pool, SQLDialect.POSTGRES)
        .execute("CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text NOT NULL)");

    IdempotencyKeys<Reply> replies =
        IdempotencyKeys.create(
            pool, IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec());
    replies.createTableIfMissing();
    AtomicInteger runs = new AtomicInteger(); // how often the endpoint ran, committed or not
    // The first run waits (at most 10 s) until each of the seven other senders was told it is in
    // progress: the repeats really do arrive while it runs, however the threads are scheduled.
    CountDownLatch repeatsRefused = new CountDownLatch(7);
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    ExecutorService handlers = Executors.newFixedThreadPool(16); // a request holds a thread
    server.setExecutor(handlers);
    server.createContext(
        "/payments",
        IdempotentHttpHandler.builder(
                replies,
                "payments.create",
                (request, attempt) -> {
                  if (runs.incrementAndGet() == 1) {
                    repeatsRefused.await(10, TimeUnit.SECONDS);
                  }
                  long id =
                      attempt
                          .dsl() // commits with the stored reply, or not at all
                          .insertInto(table(name("payments")), field(name("idem_key")))
                          .values(attempt.key())
                          .returningResult(field(name("id"), Long.class))
                          .fetchOne()
                          .value1();
                  return Reply.json(201, "{\"payment\":" + id + "}")
                      .withHeader("Location", "/payments/" + id);
                })
            // For the example, who is asking comes from a header. In an application it comes from
            // the authentication in front (the context's Authenticator), never from the client.
            .principal(exchange -> exchange.getRequestHeaders().getFirst(USER))
            .build());
    server.start();
    URI payments = URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/payments");
    HttpClient client = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

    // One POST with one key, sent eight times at once (a client that retries, a proxy that
    // resends); each sender asks again after a 409 (in progress) until it gets the answer.
    String key = UUID.randomUUID().toString();
    ExecutorService senders = Executors.newFixedThreadPool(8);
    List<Future<HttpResponse<String>>> sends = new ArrayList<>();
    for (int i = 0; i < 8; i++) {
      sends.add(senders.submit(() -> untilDone(client, payments, "alice", key, repeatsRefused)));
    }
    List<String> answers = new ArrayList<>();
    int replayed = 0;
    for (Future<HttpResponse<String>> send : sends) {
      answers.add(describe(send.get()));
      replayed += send.get().headers().firstValue("Idempotent-Replayed").isPresent() ? 1 : 0;
    }
    senders.shutdown();
    System.out.println("8 concurrent sends, " + replayed + " replayed: " + Set.copyOf(answers));
    check(runs.get() == 1, "the endpoint ran " + runs.get() + " times");
    check(repeatsRefused.getCount() == 0, "the repeats did not arrive while the first ran");
    check(Set.copyOf(answers).size() == 1, "the answers differ: " + answers);
    check(answers.get(0).startsWith("201 ") && replayed == 7, replayed + " of 8 were replays");

    // The same key from another caller is that caller's own request: run for it, not replayed.
    HttpResponse<String> bob = untilDone(client, payments, "bob", key, repeatsRefused);
    System.out.println("the same key from another caller: " + describe(bob));
    check(
        runs.get() == 2 && bob.statusCode() == 201 && !describe(bob).equals(answers.get(0)),
        "bob's request did not run, or got alice's answer: " + describe(bob));

    // No principal: 401, nothing run or stored.
    HttpResponse<String> nobody = send(client, payments, null, key);
    System.out.println("no principal: " + nobody.statusCode());
    check(
        nobody.statusCode() == 401 && runs.get() == 2,
        "without a principal: " + nobody.statusCode());

    int rows = DSL.using(pool, SQLDialect.POSTGRES).fetchCount(table(name("payments")));
    check(rows == 2, rows + " payments were recorded");
    server.stop(0); // the server before its threads
    handlers.shutdown();
    DSL.using(pool, SQLDialect.POSTGRES).execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: one run per caller and key, every repeat got the same answer");
  }

  /**
   * Sends until the answer is not 409 (in progress), for at most 10 s. Retry-After says when the
   * first attempt's lease runs out (30 s by default), the latest it can still be running; a client
   * may ask again sooner, as this one does every 200 ms.
   */
  private static HttpResponse<String> untilDone(
      HttpClient client, URI uri, String user, String key, CountDownLatch refused)
      throws Exception {
    for (int attempt = 1; ; attempt++) {
      HttpResponse<String> answer = send(client, uri, user, key);
      if (answer.statusCode() != 409 || attempt == 50) {
        return answer;
      }
      if (attempt == 1) {
        refused.countDown(); // once per sender: the latch counts senders, not answers
      }
      // A client's pause between retries: it waits for the server, not for another thread.
      Thread.sleep(200);
    }
  }

  private static HttpResponse<String> send(HttpClient client, URI uri, String user, String key)
      throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(uri)
            .timeout(Duration.ofSeconds(10))
            .header("Idempotency-Key", key)
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString("{\"cents\":700}"));
    if (user != null) {
      request.header(USER, user);
    }
    return client.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private static String describe(HttpResponse<String> answer) {
    return answer.statusCode()
        + " "
        + answer.headers().firstValue("Location").orElse("")
        + " "
        + answer.body();
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
