package dev.nolock.spring.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.spring.Idempotent;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockIdempotencyAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.http.converter.autoconfigure.HttpMessageConvertersAutoConfiguration;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcTemplateAutoConfiguration;
import org.springframework.boot.tomcat.autoconfigure.servlet.TomcatServletWebServerAutoConfiguration;
import org.springframework.boot.webmvc.autoconfigure.DispatcherServletAutoConfiguration;
import org.springframework.boot.webmvc.autoconfigure.WebMvcAutoConfiguration;
import org.springframework.boot.webmvc.autoconfigure.error.ErrorMvcAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code @Idempotent} on a real Tomcat against PostgreSQL: concurrent duplicates run the controller
 * once and all get its answer, byte for byte, the repeats marked; the controller's {@code
 * JdbcTemplate} writes roll back with a failed attempt; and the draft's refusals. Each safety claim
 * has its control: the same controller without {@code @Idempotent} writes every duplicate, and a
 * write the binding does not reach stays after the failure.
 */
@ExtendWith(PostgresExtension.class)
class IdempotentMvcIT {

  record NewOrder(String item) {}

  record Placed(long id, String item) {}

  /** Holds the first "slow" order until the test lets it go. */
  static final AtomicInteger RUNS = new AtomicInteger();

  static volatile CountDownLatch release = new CountDownLatch(0);

  @RestController
  static class Orders {
    private final JdbcTemplate jdbc;
    private final JdbcTemplate unbound;

    Orders(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
      this.unbound = new JdbcTemplate(new DriverManagerDataSource(schema.jdbcUrl()));
    }

    @Idempotent(anonymous = true)
    @PostMapping("/orders")
    ResponseEntity<Placed> place(
        @RequestHeader("Idempotency-Key") String key, @RequestBody NewOrder order)
        throws InterruptedException {
      return placeWith(jdbc, key, order);
    }

    @PostMapping("/plain-orders")
    ResponseEntity<Placed> placePlain(
        @RequestHeader("Idempotency-Key") String key, @RequestBody NewOrder order)
        throws InterruptedException {
      return placeWith(jdbc, key, order);
    }

    @Idempotent(anonymous = true)
    @PostMapping("/unbound-orders")
    ResponseEntity<Placed> placeUnbound(
        @RequestHeader("Idempotency-Key") String key, @RequestBody NewOrder order)
        throws InterruptedException {
      return placeWith(unbound, key, order);
    }

    @Idempotent
    @PostMapping("/authenticated-orders")
    ResponseEntity<Placed> placeAuthenticated(
        @RequestHeader("Idempotency-Key") String key, @RequestBody NewOrder order)
        throws InterruptedException {
      return placeWith(jdbc, key, order);
    }

    private static ResponseEntity<Placed> placeWith(JdbcTemplate jdbc, String key, NewOrder order)
        throws InterruptedException {
      RUNS.incrementAndGet();
      Long id =
          jdbc.queryForObject(
              "insert into idem_orders (k, item) values (?, ?) returning id",
              Long.class,
              key,
              order.item());
      if (order.item().equals("slow")) {
        assertThat(release.await(30, TimeUnit.SECONDS)).isTrue();
      }
      if (order.item().equals("fail")) {
        throw new IllegalStateException("the controller fails after its write");
      }
      return ResponseEntity.created(URI.create("/orders/" + id)).body(new Placed(id, order.item()));
    }
  }

  @Configuration(proxyBeanMethods = false)
  @ImportAutoConfiguration({
    DataSourceAutoConfiguration.class,
    JdbcTemplateAutoConfiguration.class,
    JacksonAutoConfiguration.class,
    HttpMessageConvertersAutoConfiguration.class,
    TomcatServletWebServerAutoConfiguration.class,
    DispatcherServletAutoConfiguration.class,
    WebMvcAutoConfiguration.class,
    ErrorMvcAutoConfiguration.class,
    NolockAutoConfiguration.class,
    NolockIdempotencyAutoConfiguration.class
  })
  @Import(Orders.class)
  static class App {}

  private static PostgresSchema schema;
  private static ConfigurableApplicationContext app;
  private static String base;
  private final HttpClient http = HttpClient.newHttpClient();

  @BeforeAll
  static void start(PostgresSchema postgres) {
    schema = postgres;
    schema.dsl().execute("drop table if exists idem_orders");
    // No unique key on k: a request run twice must show as two rows.
    schema.dsl().execute("create table idem_orders (id bigserial primary key, k text, item text)");
    app =
        new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.SERVLET)
            .properties(
                "server.port=0",
                "server.address=127.0.0.1",
                "spring.datasource.url=" + schema.jdbcUrl(),
                "nolock.create-tables=true",
                "nolock.idempotency.lease=2s",
                "nolock.idempotency.max-body-bytes=1000")
            .run();
    base = "http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port");
  }

  @AfterAll
  static void stop() {
    if (app != null) {
      app.close();
    }
  }

  @BeforeEach
  void reset() {
    schema.dsl().execute("truncate idem_orders");
    release = new CountDownLatch(0);
  }

  private HttpResponse<String> post(String path, String key, String body) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(base + path))
            .header("Content-Type", "application/json")
            .POST(HttpRequest.BodyPublishers.ofString(body));
    if (key != null) {
      request.header("Idempotency-Key", key);
    }
    return http.send(request.build(), HttpResponse.BodyHandlers.ofString());
  }

  private long rows(String key) {
    return schema
        .dsl()
        .fetchOne("select count(*) from idem_orders where k = ?", key)
        .get(0, Long.class);
  }

  /** Eight concurrent sends of one request, each retried after a 409 until it gets an order. */
  private List<HttpResponse<String>> sendEightTimes(String path, String key, String body)
      throws Exception {
    AtomicInteger conflicts = new AtomicInteger();
    ExecutorService clients = Executors.newFixedThreadPool(8);
    try {
      List<Future<HttpResponse<String>>> sent = new ArrayList<>();
      for (int i = 0; i < 8; i++) {
        sent.add(
            clients.submit(
                () -> {
                  while (true) {
                    HttpResponse<String> answer = post(path, key, body);
                    if (answer.statusCode() != 409) {
                      return answer;
                    }
                    conflicts.incrementAndGet();
                    assertThat(answer.headers().firstValue("Retry-After")).isPresent();
                    TimeUnit.MILLISECONDS.sleep(50); // a client's pause before asking again
                  }
                }));
      }
      if (body.contains("slow")) {
        // The first run holds until a duplicate was seen while it ran: the race is real.
        await().atMost(Duration.ofSeconds(20)).until(() -> conflicts.get() >= 1);
        release.countDown();
      }
      List<HttpResponse<String>> answers = new ArrayList<>();
      for (Future<HttpResponse<String>> answer : sent) {
        answers.add(answer.get(60, TimeUnit.SECONDS));
      }
      return answers;
    } finally {
      clients.shutdownNow();
    }
  }

  @Test
  void concurrentDuplicatesRunOnceAndAllGetTheFirstAnswerTheRepeatsMarked() throws Exception {
    release = new CountDownLatch(1);
    List<HttpResponse<String>> answers =
        sendEightTimes("/orders", "key-concurrent", "{\"item\":\"slow\"}");
    assertThat(rows("key-concurrent")).isOne();
    HttpResponse<String> first = answers.get(0);
    assertThat(answers)
        .allSatisfy(
            a -> {
              assertThat(a.statusCode()).isEqualTo(201);
              assertThat(a.body()).isEqualTo(first.body());
              assertThat(a.headers().firstValue("Location"))
                  .isEqualTo(first.headers().firstValue("Location"));
              assertThat(a.headers().firstValue("Content-Type")).hasValue("application/json");
            });
    assertThat(answers)
        .filteredOn(a -> a.headers().firstValue("Idempotent-Replayed").isPresent())
        .hasSize(7);
    HttpResponse<String> later = post("/orders", "key-concurrent", "{\"item\":\"slow\"}");
    assertThat(later.statusCode()).isEqualTo(201);
    assertThat(later.body()).isEqualTo(first.body());
    assertThat(later.headers().firstValue("Idempotent-Replayed")).hasValue("true");
    assertThat(rows("key-concurrent")).isOne();
  }

  @Test
  void theControlWithoutIdempotentEveryDuplicateWrites() throws Exception {
    sendEightTimes("/plain-orders", "key-plain", "{\"item\":\"book\"}");
    assertThat(rows("key-plain")).isEqualTo(8);
  }

  @Test
  void theControllersWriteRollsBackWhenItThrowsAndTheKeyIsReleased() throws Exception {
    HttpResponse<String> failed = post("/orders", "key-fail", "{\"item\":\"fail\"}");
    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(rows("key-fail")).isZero();
    // Released, not stored: the same request runs again.
    int before = RUNS.get();
    post("/orders", "key-fail", "{\"item\":\"fail\"}");
    assertThat(RUNS.get()).isEqualTo(before + 1);
  }

  @Test
  void theControlAWriteTheBindingDoesNotReachStaysWhenTheControllerThrows() throws Exception {
    HttpResponse<String> failed = post("/unbound-orders", "key-unbound", "{\"item\":\"fail\"}");
    assertThat(failed.statusCode()).isEqualTo(500);
    assertThat(rows("key-unbound")).isOne();
  }

  @Test
  void aKeyReusedWithAnotherBodyIs422AndRunsNothing() throws Exception {
    assertThat(post("/orders", "key-reused", "{\"item\":\"book\"}").statusCode()).isEqualTo(201);
    HttpResponse<String> reused = post("/orders", "key-reused", "{\"item\":\"pen\"}");
    assertThat(reused.statusCode()).isEqualTo(422);
    assertThat(reused.headers().firstValue("Content-Type")).hasValue("application/problem+json");
    assertThat(rows("key-reused")).isOne();
  }

  @Test
  void aMissingOrMalformedKeyIs400AndRunsNothing() throws Exception {
    int before = RUNS.get();
    assertThat(post("/orders", null, "{\"item\":\"book\"}").statusCode()).isEqualTo(400);
    assertThat(post("/orders", "has space", "{\"item\":\"book\"}").statusCode()).isEqualTo(400);
    assertThat(RUNS.get()).isEqualTo(before);
  }

  @Test
  void withoutAPrincipalAMethodThatDidNotChooseAnonymousIs401() throws Exception {
    int before = RUNS.get();
    HttpResponse<String> answer = post("/authenticated-orders", "key-401", "{\"item\":\"book\"}");
    assertThat(answer.statusCode()).isEqualTo(401);
    assertThat(RUNS.get()).isEqualTo(before);
  }

  @Test
  void aBodyOverTheLimitIs413AndRunsNothing() throws Exception {
    int before = RUNS.get();
    String big = "{\"item\":\"" + "x".repeat(2000) + "\"}";
    assertThat(post("/orders", "key-413", big).statusCode()).isEqualTo(413);
    assertThat(RUNS.get()).isEqualTo(before);
  }
}
