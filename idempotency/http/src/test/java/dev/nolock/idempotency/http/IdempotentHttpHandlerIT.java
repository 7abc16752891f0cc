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
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The HTTP adapter on a real JDK {@code HttpServer} on 127.0.0.1, driven by {@code
 * java.net.http.HttpClient}; the endpoint's side effect is a row in an {@code orders} table with no
 * unique key on the idempotency key.
 */
@ExtendWith(PostgresExtension.class)
class IdempotentHttpHandlerIT {

  private static final Table<?> ORDERS = table(name("orders"));
  private static final Field<String> ORDER_KEY = field(name("idem_key"), String.class);
  private static final Field<String> ITEM = field(name("item"), String.class);
  private static final Field<Long> ATTEMPT = field(name("attempt"), Long.class);

  private final PostgresSchema schema;
  private final DSLContext dsl;

  /** Per key: the endpoint counts {@code entered} down, then waits for {@code release}. */
  private record Hold(CountDownLatch entered, CountDownLatch release) {}

  private final Map<String, Hold> holds = new ConcurrentHashMap<>();

  /**
   * Per key: counted down by the server each time it answers 409 for the key; the first run waits
   * for it, so that every duplicate provably arrives while the first is in progress.
   */
  private final Map<String, CountDownLatch> conflicts = new ConcurrentHashMap<>();

  /** Per key: whether the server thread's interrupt flag was set once the handler returned. */
  private final Map<String, Boolean> interruptedAfter = new ConcurrentHashMap<>();

  private ExecutorService serverThreads;
  private ExecutorService clientThreads;
  private HttpServer server;
  private HttpClient client;
  private URI orders;

  IdempotentHttpHandlerIT(PostgresSchema schema) {
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
            "CREATE TABLE orders (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
                + " item text NOT NULL, attempt bigint NOT NULL)");
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
                "orders.create",
                (request, attempt) -> {
                  attempt
                      .dsl()
                      .insertInto(ORDERS, ORDER_KEY, ITEM, ATTEMPT)
                      .values(attempt.key(), request.bodyText(), attempt.token().value())
                      .execute();
                  CountDownLatch duplicates = conflicts.get(attempt.key());
                  if (duplicates != null) {
                    awaitQuietly(duplicates);
                  }
                  Hold hold = holds.get(attempt.key());
                  if (hold != null) {
                    hold.entered().countDown();
                    awaitQuietly(hold.release());
                  }
                  if (request.bodyText().equals("explode")) {
                    throw new IllegalStateException("the warehouse is on fire");
                  }
                  if (request.bodyText().equals("unreachable")) {
                    throw new IOException("the warehouse is unreachable");
                  }
                  if (request.bodyText().equals("interrupted")) {
                    throw new InterruptedException("the server is shutting down");
                  }
                  if (request.bodyText().startsWith("located")) {
                    return new Reply(
                            201,
                            "application/vnd.nolock.order+json; charset=utf-8",
                            ("{\"order\":" + attempt.token().value() + "}")
                                .getBytes(StandardCharsets.UTF_8))
                        .withHeader("Location", "/orders/" + attempt.token().value())
                        .withHeader("Link", "</orders>; rel=\"collection\"")
                        .withHeader("Link", "</items>; rel=\"related\"");
                  }
                  return Reply.json(
                      201,
                      "{\"item\":\""
                          + request.bodyText()
                          + "\",\"order\":"
                          + attempt.token().value()
                          + "}");
                })
            .anonymous()
            .maxBodyBytes(1024)
            .build();
    serverThreads = Executors.newFixedThreadPool(16);
    clientThreads = Executors.newFixedThreadPool(8);
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 128);
    server.createContext(
        "/orders",
        exchange -> {
          String key = exchange.getRequestHeaders().getFirst(IdempotentHttpHandler.KEY_HEADER);
          handler.handle(exchange);
          if (key != null) {
            interruptedAfter.put(key, Thread.interrupted());
          }
          CountDownLatch duplicates = key == null ? null : conflicts.get(key);
          if (duplicates != null && exchange.getResponseCode() == 409) {
            duplicates.countDown();
          }
        });
    server.setExecutor(serverThreads);
    server.start();
    orders = URI.create("http://127.0.0.1:" + server.getAddress().getPort() + "/orders");
    client =
        HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1)
            .executor(clientThreads)
            .connectTimeout(Duration.ofSeconds(10))
            .build();
  }

  @AfterEach
  void stopServer() {
    holds.values().forEach(h -> h.release().countDown());
    conflicts
        .values()
        .forEach(
            c -> {
              while (c.getCount() > 0) {
                c.countDown();
              }
            });
    server.stop(0);
    serverThreads.shutdownNow();
    clientThreads.shutdownNow();
  }

  private HttpRequest post(String key, String body) {
    return postTo(orders, key, body);
  }

  private static HttpRequest postTo(URI uri, String key, String body) {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(uri)
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (key != null) {
      request.header(IdempotentHttpHandler.KEY_HEADER, key);
    }
    return request.build();
  }

  private HttpResponse<String> send(HttpRequest request) throws Exception {
    return client.send(request, HttpResponse.BodyHandlers.ofString());
  }

  private int orderRows(String key) {
    return dsl.fetchCount(ORDERS, ORDER_KEY.eq(key));
  }

  private static boolean replayed(HttpResponse<?> response) {
    return response.headers().firstValue(IdempotentHttpHandler.REPLAYED_HEADER).isPresent();
  }

  @Test
  void concurrentDuplicateRequestsMakeExactlyOneOrderPerKey() throws Exception {
    // 5 keys x 20 duplicates, all sent at once. Each key's first run holds its transaction (and a
    // pool connection: 5 of 8) until the server has answered its 19 duplicates with 409.
    int keyCount = 5;
    int duplicates = 20;
    List<String> keys = new ArrayList<>();
    for (int k = 0; k < keyCount; k++) {
      String key = UUID.randomUUID().toString();
      keys.add(key);
      conflicts.put(key, new CountDownLatch(duplicates - 1));
    }
    Map<String, List<CompletableFuture<HttpResponse<String>>>> sent = new ConcurrentHashMap<>();
    for (int d = 0; d < duplicates; d++) {
      for (String key : keys) {
        sent.computeIfAbsent(key, k -> new ArrayList<>())
            .add(client.sendAsync(post(key, "book"), HttpResponse.BodyHandlers.ofString()));
      }
    }

    for (String key : keys) {
      List<HttpResponse<String>> answers = new ArrayList<>();
      for (CompletableFuture<HttpResponse<String>> response : sent.get(key)) {
        answers.add(response.get(120, TimeUnit.SECONDS));
      }
      Map<Integer, Long> statuses =
          answers.stream()
              .collect(Collectors.groupingBy(HttpResponse::statusCode, Collectors.counting()));
      assertThat(statuses).containsExactlyInAnyOrderEntriesOf(Map.of(201, 1L, 409, 19L));
      HttpResponse<String> firstRun =
          answers.stream().filter(r -> r.statusCode() == 201).findFirst().orElseThrow();
      assertThat(replayed(firstRun)).isFalse();
      assertThat(orderRows(key)).as("orders for " + key).isEqualTo(1);

      HttpResponse<String> later = send(post(key, "book"));
      assertThat(later.statusCode()).isEqualTo(201);
      assertThat(later.headers().firstValue(IdempotentHttpHandler.REPLAYED_HEADER))
          .contains("true");
      assertThat(later.headers().firstValue("Content-Type")).contains("application/json");
      assertThat(later.body()).isEqualTo(firstRun.body());
    }
  }

  @Test
  void aDuplicateWhileTheFirstRunsIs409WithRetryAfterAndThenTheReplay() throws Exception {
    String key = UUID.randomUUID().toString();
    Hold hold = new Hold(new CountDownLatch(1), new CountDownLatch(1));
    holds.put(key, hold);
    CompletableFuture<HttpResponse<String>> first =
        client.sendAsync(post(key, "lamp"), HttpResponse.BodyHandlers.ofString());
    assertThat(hold.entered().await(30, TimeUnit.SECONDS)).isTrue();

    HttpResponse<String> duplicate = send(post(key, "lamp"));
    hold.release().countDown();
    HttpResponse<String> firstResponse = first.get(60, TimeUnit.SECONDS);
    HttpResponse<String> replay = send(post(key, "lamp"));

    assertThat(duplicate.statusCode()).isEqualTo(409);
    assertThat(duplicate.headers().firstValue("Retry-After")).isPresent();
    assertThat(duplicate.headers().firstValue("Content-Type")).contains("application/problem+json");
    assertThat(duplicate.body()).contains("\"status\":409");
    assertThat(firstResponse.statusCode()).isEqualTo(201);
    assertThat(replayed(firstResponse)).isFalse();
    assertThat(replay.statusCode()).isEqualTo(201);
    assertThat(replay.body()).isEqualTo(firstResponse.body());
    assertThat(replayed(replay)).isTrue();
    assertThat(orderRows(key)).isEqualTo(1);
  }

  @Test
  void theReplayCarriesTheFirstAnswersLocationAndContentType() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> first = send(post(key, "located chair"));
    HttpResponse<String> replay = send(post(key, "located chair"));

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(replayed(first)).isFalse();
    String location = first.headers().firstValue("Location").orElseThrow();
    assertThat(location).startsWith("/orders/");
    assertThat(first.headers().firstValue("Content-Type"))
        .contains("application/vnd.nolock.order+json; charset=utf-8");

    assertThat(replay.statusCode()).isEqualTo(201);
    assertThat(replayed(replay)).isTrue();
    assertThat(replay.body()).isEqualTo(first.body());
    assertThat(replay.headers().firstValue("Location")).contains(location);
    assertThat(replay.headers().firstValue("Content-Type"))
        .contains("application/vnd.nolock.order+json; charset=utf-8");
    assertThat(replay.headers().allValues("Link"))
        .containsExactly("</orders>; rel=\"collection\"", "</items>; rel=\"related\"");
    assertThat(orderRows(key)).isEqualTo(1);
  }

  @Test
  void aMissingOrMalformedKeyIs400AndNothingRuns() throws Exception {
    HttpResponse<String> missing = send(post(null, "chair"));
    HttpResponse<String> withSpace = send(post("\"has space\"", "chair"));
    HttpResponse<String> tooLong = send(post("k".repeat(256), "chair"));
    HttpResponse<String> unclosed = send(post("\"abc", "chair"));

    assertThat(List.of(missing, withSpace, tooLong, unclosed))
        .allSatisfy(
            r -> {
              assertThat(r.statusCode()).isEqualTo(400);
              assertThat(r.headers().firstValue("Content-Type"))
                  .contains("application/problem+json");
            });
    assertThat(missing.body()).contains("missing");
    assertThat(dsl.fetchCount(ORDERS, ITEM.eq("chair"))).isZero();
  }

  @Test
  void theSameKeyWithAnotherBodyIs422() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> first = send(post(key, "table"));
    HttpResponse<String> other = send(post(key, "sofa"));

    assertThat(first.statusCode()).isEqualTo(201);
    assertThat(other.statusCode()).isEqualTo(422);
    assertThat(other.body()).contains("\"status\":422");
    assertThat(orderRows(key)).isEqualTo(1);
  }

  @Test
  void theDraftsQuotedKeyAndTheBareKeyAreTheSameKey() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> quoted = send(post("\"" + key + "\"", "desk"));
    HttpResponse<String> bare = send(post(key, "desk"));

    assertThat(quoted.statusCode()).isEqualTo(201);
    assertThat(replayed(quoted)).isFalse();
    assertThat(replayed(bare)).isTrue();
    assertThat(orderRows(key)).isEqualTo(1);
  }

  @Test
  void aFailingEndpointIs500AndItsKeyIsReleasedForARetry() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> failed = send(post(key, "explode"));

    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(orderRows(key)).as("the failed attempt's order was rolled back").isZero();
    // Released at once: the retry is not told 409, it runs (and fails) again.
    assertThat(send(post(key, "explode")).statusCode()).isEqualTo(500);
  }

  @Test
  void aCheckedExceptionOfTheEndpointIs500AndItsKeyIsReleasedLikeAnUncheckedOne() throws Exception {
    String checkedKey = UUID.randomUUID().toString();
    String uncheckedKey = UUID.randomUUID().toString();
    HttpResponse<String> checked = send(post(checkedKey, "unreachable"));
    HttpResponse<String> unchecked = send(post(uncheckedKey, "explode"));

    assertThat(checked.statusCode()).isEqualTo(500);
    assertThat(checked.headers().firstValue("Content-Type")).contains("application/problem+json");
    assertThat(checked.body()).isEqualTo(unchecked.body());
    assertThat(orderRows(checkedKey)).as("the failed attempt's order was rolled back").isZero();
    assertThat(interruptedAfter).containsEntry(checkedKey, false);
    // Released at once: the retry is not told 409, it runs (and fails) again.
    assertThat(send(post(checkedKey, "unreachable")).statusCode()).isEqualTo(500);
  }

  @Test
  void anInterruptedEndpointIs500AndLeavesTheServerThreadUninterrupted() throws Exception {
    String key = UUID.randomUUID().toString();
    HttpResponse<String> interrupted = send(post(key, "interrupted"));

    assertThat(interrupted.statusCode()).isEqualTo(500);
    assertThat(orderRows(key)).isZero();
    assertThat(interruptedAfter).containsEntry(key, false);
  }

  /**
   * Without an executor the JDK's server runs every handler on its one dispatcher thread, as a user
   * who skips {@code setExecutor} gets: an interrupt flag left set there would close every later
   * connection.
   */
  @Test
  void anInterruptedEndpointOnTheDispatcherThreadLeavesTheServerServing() throws Exception {
    IdempotentHttpHandler handler =
        IdempotentHttpHandler.builder(
                IdempotencyKeys.create(
                    schema.dataSource(),
                    IdempotencyConfig.ofDefaults(),
                    IdempotentHttpHandler.replyCodec()),
                "orders.dispatcher",
                (request, attempt) -> {
                  switch (request.bodyText()) {
                    case "interrupted" -> throw new InterruptedException("shutting down");
                    case "wrapped" -> {
                      // The common idiom: keep the flag, throw something unchecked.
                      Thread.currentThread().interrupt();
                      throw new IllegalStateException("interrupted while waiting");
                    }
                    case "flagged" -> Thread.currentThread().interrupt(); // and returns normally
                    default -> {}
                  }
                  return Reply.json(201, "{}");
                })
            .anonymous()
            .build();
    HttpServer onDispatcher = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    onDispatcher.createContext("/orders", handler);
    onDispatcher.start();
    try {
      URI uri = URI.create("http://127.0.0.1:" + onDispatcher.getAddress().getPort() + "/orders");
      for (String body : List.of("interrupted", "wrapped", "flagged")) {
        HttpResponse<String> answer = send(postTo(uri, UUID.randomUUID().toString(), body));
        HttpResponse<String> next = send(postTo(uri, UUID.randomUUID().toString(), "next"));

        assertThat(answer.statusCode()).as(body).isEqualTo(body.equals("flagged") ? 201 : 500);
        assertThat(next.statusCode())
            .as("the next request after \"" + body + "\", on the same dispatcher thread")
            .isEqualTo(201);
      }
    } finally {
      onDispatcher.stop(0);
    }
  }

  @Test
  void aBodyOverTheLimitIs413() throws Exception {
    HttpResponse<String> large = send(post(UUID.randomUUID().toString(), "x".repeat(2000)));

    assertThat(large.statusCode()).isEqualTo(413);
  }

  private static void awaitQuietly(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
