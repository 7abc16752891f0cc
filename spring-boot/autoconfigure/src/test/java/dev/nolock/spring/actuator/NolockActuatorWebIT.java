package dev.nolock.spring.actuator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.queue.JobInfo;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.queue.QueueAdmin;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.internal.QueueSettings;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import tools.jackson.databind.json.JsonMapper;

/**
 * The {@code nolock} endpoint and nolock's meters in a real web application: what HTTP exposes by
 * default, what the endpoint shows and never shows, and that the meters reach the application's
 * registry.
 */
@ExtendWith(PostgresExtension.class)
class NolockActuatorWebIT {

  record Note(String text) {}

  static final String SECRET_PAYLOAD = "SECRET-PAYLOAD-3f9a61";
  static final String SECRET_KEY = "SECRET-KEY-77b2c4";

  private final PostgresSchema schema;
  private final HttpClient http = HttpClient.newHttpClient();

  NolockActuatorWebIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeEach
  void reset() {
    schema.dsl().execute("drop table if exists nolock_jobs");
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
  }

  /** Every job of "notes" fails and, with one attempt, becomes a dead letter. */
  @Configuration(proxyBeanMethods = false)
  // Without Spring Security (on this module's test classpath for other tests): what is asserted
  // here is Actuator's exposure, not the application's authentication.
  @EnableAutoConfiguration(
      excludeName = {
        "org.springframework.boot.security.autoconfigure.SecurityAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.UserDetailsServiceAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.web.servlet.ServletWebSecurityAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.web.servlet.SecurityFilterAutoConfiguration",
        "org.springframework.boot.security.autoconfigure.actuate.web.servlet.ManagementWebSecurityAutoConfiguration"
      })
  @SpringBootConfiguration
  static class App {

    @JobHandler("notes")
    void fail(Note note) {
      throw new IllegalStateException("refused on purpose");
    }
  }

  /** The same application with a {@code QueueSettings} of its own that gives queues no meters. */
  @Configuration(proxyBeanMethods = false)
  static class NoQueueMeters {

    @Bean
    QueueSettings nolockQueueSettings(
        dev.nolock.spring.autoconfigure.NolockQueueProperties properties) {
      return new QueueSettings(properties, null);
    }
  }

  private ConfigurableApplicationContext start(Class<?>[] sources, String... extra) {
    List<String> properties =
        new ArrayList<>(
            List.of(
                "server.port=0",
                "spring.datasource.url=" + schema.jdbcUrl(),
                "spring.jpa.hibernate.ddl-auto=none",
                "management.health.redis.enabled=false",
                "management.endpoint.health.show-details=always",
                "nolock.create-tables=true",
                "nolock.lock.backend=postgres",
                "nolock.lock.purpose=efficiency",
                "nolock.leader.elections.reports.lease-duration=15s",
                "nolock.queue.queues.notes.max-attempts=1",
                "nolock.queue.queues.notes.poll-interval=100ms"));
    properties.addAll(List.of(extra));
    return new SpringApplicationBuilder(sources)
        .properties(properties.toArray(String[]::new))
        .run();
  }

  private HttpResponse<String> get(ConfigurableApplicationContext context, String path)
      throws Exception {
    int port = ((WebServerApplicationContext) context).getWebServer().getPort();
    return http.send(
        HttpRequest.newBuilder(URI.create("http://localhost:" + port + path)).GET().build(),
        HttpResponse.BodyHandlers.ofString());
  }

  @Test
  void theEndpointIsNotExposedOverHttpByDefault() throws Exception {
    try (ConfigurableApplicationContext context = start(new Class<?>[] {App.class})) {
      // Actuator answers over HTTP (health is exposed by default), so the 404 is the endpoint's.
      assertThat(get(context, "/actuator/health").statusCode()).isEqualTo(200);
      assertThat(get(context, "/actuator/nolock").statusCode()).isEqualTo(404);
    }
  }

  @Test
  void exposedTheEndpointShowsTokensAndCountsButNeverPayloadsOrKeys() throws Exception {
    try (ConfigurableApplicationContext context =
        start(
            new Class<?>[] {App.class},
            "management.endpoints.web.exposure.include=nolock,health,prometheus")) {
      JobQueue<Note> notes = context.getBean(JobQueues.class).queue("notes", Note.class);
      notes.enqueue(NewJob.of(new Note(SECRET_PAYLOAD)).uniqueKey(SECRET_KEY));
      JsonMapper json = context.getBean(JsonMapper.class);
      HeldLock nightly =
          context
              .getBean(FencedLock.class)
              .tryAcquire("nightly-report", Duration.ofSeconds(30))
              .get();

      // Wait until the job is a dead letter and this instance leads: both appear in the report.
      await()
          .atMost(Duration.ofSeconds(30))
          .until(
              () -> {
                Map<?, ?> report =
                    json.readValue(get(context, "/actuator/nolock").body(), Map.class);
                Map<?, ?> queue = (Map<?, ?>) ((List<?>) report.get("queues")).get(0);
                Map<?, ?> election = (Map<?, ?>) ((List<?>) report.get("elections")).get(0);
                return Integer.valueOf(1).equals(queue.get("deadLetters"))
                    && Boolean.TRUE.equals(election.get("leader"));
              });
      HttpResponse<String> response = get(context, "/actuator/nolock");
      assertThat(response.statusCode()).isEqualTo(200);
      Map<?, ?> report = json.readValue(response.body(), Map.class);
      Map<?, ?> election = (Map<?, ?>) ((List<?>) report.get("elections")).get(0);
      long backendToken =
          PostgresLockBackend.create(schema.dataSource()).holder("reports").get().token().value();
      assertThat(election.get("name")).isEqualTo("reports");
      assertThat(((Number) election.get("token")).longValue()).isEqualTo(backendToken);
      assertThat(((Number) election.get("holderToken")).longValue()).isEqualTo(backendToken);

      assertThat((List<?>) report.get("locks"))
          .singleElement()
          .satisfies(
              lock -> {
                Map<?, ?> held = (Map<?, ?>) lock;
                assertThat(held.get("name")).isEqualTo("nightly-report");
                assertThat(((Number) held.get("token")).longValue())
                    .isEqualTo(nightly.token().value());
              });
      nightly.release();
      assertThat(
              (List<?>)
                  json.readValue(get(context, "/actuator/nolock").body(), Map.class).get("locks"))
          .isEmpty();

      assertThat(response.body()).doesNotContain(SECRET_PAYLOAD).doesNotContain(SECRET_KEY);
      // Negative control: the dead letter the report counts holds both, and the same mapper
      // renders them in the report's form, so the search above would find them had the endpoint
      // put the job's payload or key in a section.
      JobInfo<Note> deadLetter = notes.admin().deadLetters(QueueAdmin.MAX_PAGE).letters().get(0);
      Map<Object, Object> leaky = new java.util.LinkedHashMap<>(report);
      leaky.put(
          "leaked",
          Map.of("payload", deadLetter.payload().get(), "uniqueKey", deadLetter.uniqueKey().get()));
      assertThat(json.writeValueAsString(leaky)).contains(SECRET_PAYLOAD).contains(SECRET_KEY);

      String health = get(context, "/actuator/health/nolockQueues/notes").body();
      assertThat(health).contains("\"status\":\"UP\"");
      assertThat(get(context, "/actuator/health/nolockElections/reports").body())
          .contains("\"status\":\"UP\"")
          .contains("\"leader\":true");

      String scrape = get(context, "/actuator/prometheus").body();
      assertThat(meterLines(scrape, "nolock_queue_enqueued_total"))
          .anySatisfy(line -> assertThat(line).contains("\"notes\"").endsWith(" 1.0"));
      assertThat(meterLines(scrape, "nolock_queue_dead_letters_total"))
          .anySatisfy(line -> assertThat(line).contains("\"notes\"").endsWith(" 1.0"));
      assertThat(meterLines(scrape, "nolock_leadership_changes_total"))
          .anySatisfy(line -> assertThat(line).contains("\"reports\""));
    }
  }

  /**
   * Negative control of the meters: a queue built without the registry leaves no {@code
   * nolock_queue_} series, so the assertions above see the starter's wiring, not something
   * Prometheus always shows.
   */
  @Test
  void withoutTheRegistryTheQueueMetersAreMissingFromTheScrape() throws Exception {
    try (ConfigurableApplicationContext context =
        start(
            new Class<?>[] {App.class, NoQueueMeters.class},
            "management.endpoints.web.exposure.include=prometheus",
            "spring.main.allow-bean-definition-overriding=true")) {
      context.getBean(JobQueues.class).queue("notes", Note.class).enqueue(NewJob.of(new Note("x")));
      String scrape = get(context, "/actuator/prometheus").body();
      assertThat(scrape).doesNotContain("nolock_queue_").contains("nolock_leadership_");
    }
  }

  private static List<String> meterLines(String scrape, String meter) {
    return scrape.lines().filter(line -> line.startsWith(meter + "{")).toList();
  }
}
