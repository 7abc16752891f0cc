package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.sun.net.httpserver.Authenticator;
import com.sun.net.httpserver.BasicAuthenticator;
import com.sun.net.httpserver.HttpContext;
import com.sun.net.httpserver.HttpServer;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Base64;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's snippet, kept compiling and running. */
@ExtendWith(PostgresExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  /** A payment provider with its own idempotency keys, like Stripe's. */
  interface PaymentProvider {
    /** Charges once per idempotency key; a repeat returns the first charge's id. */
    String charge(String idempotencyKey, long cents);
  }

  private static final class FakeProvider implements PaymentProvider {
    private final Map<String, String> charges = new ConcurrentHashMap<>();
    private final AtomicInteger calls = new AtomicInteger();

    @Override
    public String charge(String idempotencyKey, long cents) {
      calls.incrementAndGet();
      return charges.computeIfAbsent(idempotencyKey, k -> "ch_" + charges.size());
    }
  }

  @Test
  void theReadmeSnippetAnswersOncePerKeyAndReplays(PostgresSchema schema) throws Exception {
    schema
        .dsl()
        .execute(
            "CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
                + " cents bigint NOT NULL, charge text)");
    DataSource pool = schema.dataSource();
    FakeProvider provider = new FakeProvider();
    Authenticator authenticator =
        new BasicAuthenticator("payments") {
          @Override
          public boolean checkCredentials(String user, String password) {
            return user.equals("alice") && password.equals("secret");
          }
        };

    // --- README: HTTP ---
    IdempotencyKeys<Reply> replies =
        IdempotencyKeys.create(
            pool, IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec());
    replies.createTableIfMissing();
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    // Without an executor the server runs every request on its one dispatcher thread: one slow
    // client would hold up every endpoint. A request holds a thread until it is answered.
    ExecutorService handlers = Executors.newFixedThreadPool(16);
    server.setExecutor(handlers);
    HttpContext payments =
        server.createContext(
            "/payments",
            IdempotentHttpHandler.builder(
                    replies,
                    "payments.create",
                    (request, attempt) -> {
                      String charge = provider.charge(attempt.idempotencyKeyForDownstream(), 700);
                      attempt
                          .dsl()
                          .insertInto(
                              table(name("payments")),
                              field(name("idem_key")),
                              field(name("cents")),
                              field(name("charge")))
                          .values(attempt.key(), 700L, charge)
                          .execute();
                      return Reply.json(201, "{\"charge\":\"" + charge + "\"}")
                          .withHeader("Location", "/payments/" + charge);
                    })
                // who is asking, from the context's Authenticator: each principal has its own keys
                .principal(e -> e.getPrincipal() == null ? null : e.getPrincipal().getUsername())
                .build());
    payments.setAuthenticator(authenticator); // e.g. a BasicAuthenticator that checks your users
    server.start();
    // --- end ---
    try {
      HttpClient client = HttpClient.newHttpClient();
      HttpRequest request =
          HttpRequest.newBuilder(
                  URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/payments"))
              .header("Idempotency-Key", "\"" + UUID.randomUUID() + "\"")
              .header(
                  "Authorization",
                  "Basic "
                      + Base64.getEncoder()
                          .encodeToString("alice:secret".getBytes(StandardCharsets.UTF_8)))
              .POST(HttpRequest.BodyPublishers.ofString("{\"cents\":700}"))
              .build();
      HttpResponse<String> first = client.send(request, HttpResponse.BodyHandlers.ofString());
      HttpResponse<String> again = client.send(request, HttpResponse.BodyHandlers.ofString());

      assertThat(first.statusCode()).isEqualTo(201);
      assertThat(again.statusCode()).isEqualTo(201);
      assertThat(again.body()).isEqualTo(first.body());
      assertThat(again.headers().firstValue("Idempotent-Replayed")).contains("true");
      assertThat(again.headers().firstValue("Location")).contains("/payments/ch_0");
      assertThat(again.headers().firstValue("Content-Type")).contains("application/json");
      assertThat(provider.calls).hasValue(1);
    } finally {
      server.stop(0);
      handlers.shutdownNow();
    }
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheTestRunsForUsage() {
    ReadmeSnippet.javaBlock(README, "## Usage").assertRunBy(ReadmeSnippetsIT.class, "HTTP");
  }
}
