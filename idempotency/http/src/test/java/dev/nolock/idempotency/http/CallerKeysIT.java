package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.sun.net.httpserver.HttpServer;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Keys belong to their caller: a real {@code HttpServer} whose handler takes the principal from an
 * {@code X-User} header (standing in for an authentication filter); the endpoint writes one row per
 * run into {@code caller_orders}, which has no unique key on the idempotency key.
 */
@ExtendWith(PostgresExtension.class)
class CallerKeysIT {

  private static final String USER = "X-User";
  private static final Table<?> ORDERS = table(name("caller_orders"));
  private static final Field<String> ORDER_KEY = field(name("idem_key"), String.class);
  private static final Field<String> ITEM = field(name("item"), String.class);

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private ExecutorService serverThreads;
  private HttpServer server;
  private HttpClient client;
  private URI orders;

  CallerKeysIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(
            schema.dataSource(), IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec())
        .createTableIfMissing();
    schema
        .dsl()
        .execute(
            "CREATE TABLE caller_orders (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
                + " item text NOT NULL)");
  }

  @BeforeEach
  void startServer() throws Exception {
    IdempotencyKeys<Reply> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.ofDefaults(),
            IdempotentHttpHandler.replyCodec());
    IdempotentHttpHandler handler =
        IdempotentHttpHandler.builder(
                keys,
                "caller_orders.create",
                (request, attempt) -> {
                  long id =
                      attempt
                          .dsl()
                          .insertInto(ORDERS, ORDER_KEY, ITEM)
                          .values(attempt.key(), request.bodyText())
                          .returningResult(field(name("id"), Long.class))
                          .fetchOne()
                          .value1();
                  return Reply.json(201, "{\"order\":" + id + "}");
                })
            // "blank" stands for an authentication that yields only spaces (a header would be
            // trimmed on the way).
            .principal(
                e -> {
                  String user = e.getRequestHeaders().getFirst(USER);
                  return "blank".equals(user) ? "   " : user;
                })
            .build();
    serverThreads = Executors.newFixedThreadPool(4);
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    server.createContext("/caller-orders", handler);
    server.setExecutor(serverThreads);
    server.start();
    orders = URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/caller-orders");
    client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
  }

  @AfterEach
  void stopServer() {
    server.stop(0);
    serverThreads.shutdownNow();
  }

  private HttpResponse<String> post(String user, String key, String body) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(orders)
            .timeout(Duration.ofSeconds(60))
            .header(IdempotentHttpHandler.KEY_HEADER, key)
            .header("Content-Type", "text/plain")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (user != null) {
      request.header(USER, user);
    }
    return client.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private int orderRows(String key) {
    return dsl.fetchCount(ORDERS, ORDER_KEY.eq(key));
  }

  private static boolean replayed(HttpResponse<?> response) {
    return response.headers().firstValue(IdempotentHttpHandler.REPLAYED_HEADER).isPresent();
  }

  /**
   * B sends A's key with A's exact request: B's own request, run for B, neither A's stored answer
   * nor a 422 that tells B the key exists. Before: 422.
   */
  @Test
  void anotherCallerSendingTheSameKeyAndRequestGetsAFreshRunOfItsOwn() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> a = post("a", key, "chair");
    HttpResponse<String> b = post("b", key, "chair");
    HttpResponse<String> aAgain = post("a", key, "chair");
    HttpResponse<String> bAgain = post("b", key, "chair");

    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(replayed(b)).isFalse();
    assertThat(b.body()).isNotEqualTo(a.body());
    assertThat(orderRows(key)).isEqualTo(2);
    assertThat(replayed(aAgain)).isTrue();
    assertThat(aAgain.body()).isEqualTo(a.body());
    assertThat(replayed(bAgain)).isTrue();
    assertThat(bAgain.body()).isEqualTo(b.body());
  }

  /**
   * B sends A's key with another request: no 422 (which would tell B that A used the key, and, for
   * a key B claims first, lock A out of it for the whole retention). Before: 422.
   */
  @Test
  void anotherCallerSendingTheSameKeyWithAnotherRequestIsNotRefused() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> b = post("b", key, "squatted");
    HttpResponse<String> a = post("a", key, "chair");

    assertThat(b.statusCode()).isEqualTo(201);
    assertThat(a.statusCode()).isEqualTo(201);
    assertThat(replayed(a)).isFalse();
    assertThat(dsl.fetchCount(ORDERS, ORDER_KEY.eq(key).and(ITEM.eq("chair")))).isEqualTo(1);
  }

  /** The same key with another {@code Content-Type} is another request: 422. Before: replayed. */
  @Test
  void theSameKeyWithAnotherContentTypeIs422() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> first = post("a", key, "{}");
    HttpResponse<String> other =
        client.send(
            HttpRequest.newBuilder(orders)
                .header(IdempotentHttpHandler.KEY_HEADER, key)
                .header(USER, "a")
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString("{}"))
                .build(),
            HttpResponse.BodyHandlers.ofString());

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(orderRows(key)).isEqualTo(1);
  }

  /**
   * A request for which the principal function finds no caller (null, empty or blank) is answered
   * 401 and nothing runs or is stored, neither the endpoint's row nor a key row: running it as
   * anonymous would put it in the shared key space the handler was configured to avoid. Before: the
   * handler threw and the client got no answer; then a blank principal was answered 500.
   */
  @Test
  void aRequestWithoutAPrincipalIs401AndNothingRuns() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> missing = post(null, key, "chair");
    HttpResponse<String> empty = post("", key, "chair");
    HttpResponse<String> blank = post("blank", key, "chair");

    assertThat(missing.statusCode()).isEqualTo(401);
    assertThat(empty.statusCode()).isEqualTo(401);
    assertThat(blank.statusCode()).isEqualTo(401);
    assertThat(missing.headers().firstValue("Content-Type")).contains("application/problem+json");
    assertThat(keyRows(key)).as("key rows stored, for any caller").isZero();
    assertThat(orderRows(key)).isZero();
    assertThat(post("a", key, "chair").statusCode()).isEqualTo(201);
    assertThat(keyRows(key)).isEqualTo(1);
  }

  private int keyRows(String key) {
    return dsl.fetchCount(
        table(name("nolock_idempotency_keys")),
        field(name("idempotency_key"), String.class).eq(key));
  }
}
