package dev.nolock.spring.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.spring.Idempotent;
import dev.nolock.spring.autoconfigure.NolockAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockIdempotencyAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.util.Base64;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.http.converter.autoconfigure.HttpMessageConvertersAutoConfiguration;
import org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.jdbc.autoconfigure.JdbcTemplateAutoConfiguration;
import org.springframework.boot.security.autoconfigure.SecurityAutoConfiguration;
import org.springframework.boot.security.autoconfigure.web.servlet.SecurityFilterAutoConfiguration;
import org.springframework.boot.security.autoconfigure.web.servlet.ServletWebSecurityAutoConfiguration;
import org.springframework.boot.tomcat.autoconfigure.servlet.TomcatServletWebServerAutoConfiguration;
import org.springframework.boot.webmvc.autoconfigure.DispatcherServletAutoConfiguration;
import org.springframework.boot.webmvc.autoconfigure.WebMvcAutoConfiguration;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * With Spring Security, an {@code @Idempotent} key belongs to the authenticated principal: the same
 * key and request from another user is that user's own request and runs for it, while the first
 * user's repeat is a replay.
 */
@ExtendWith(PostgresExtension.class)
class IdempotentPrincipalIT {

  @RestController
  static class Notes {
    private final JdbcTemplate jdbc;

    Notes(JdbcTemplate jdbc) {
      this.jdbc = jdbc;
    }

    @Idempotent
    @PostMapping("/notes")
    ResponseEntity<String> add(@RequestBody String text) {
      jdbc.update("insert into idem_notes (text) values (?)", text);
      return ResponseEntity.status(201).body("added " + text);
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
    SecurityAutoConfiguration.class,
    ServletWebSecurityAutoConfiguration.class,
    SecurityFilterAutoConfiguration.class,
    NolockAutoConfiguration.class,
    NolockIdempotencyAutoConfiguration.class
  })
  @Import(Notes.class)
  static class App {
    @Bean
    SecurityFilterChain api(HttpSecurity http) throws Exception {
      return http.authorizeHttpRequests(r -> r.anyRequest().authenticated())
          .httpBasic(Customizer.withDefaults())
          .csrf(c -> c.disable())
          .build();
    }

    @Bean
    InMemoryUserDetailsManager users() {
      return new InMemoryUserDetailsManager(
          User.withUsername("alice").password("{noop}a").roles("USER").build(),
          User.withUsername("bob").password("{noop}b").roles("USER").build());
    }
  }

  private final PostgresSchema schema;

  IdempotentPrincipalIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @Test
  void oneKeyFromTwoUsersRunsForEachAndRepeatsReplay() throws Exception {
    schema.dsl().execute("drop table if exists idem_notes");
    schema.dsl().execute("create table idem_notes (text text)");
    try (ConfigurableApplicationContext app =
        new SpringApplicationBuilder(App.class)
            .web(WebApplicationType.SERVLET)
            .properties(
                "server.port=0",
                "server.address=127.0.0.1",
                "spring.datasource.url=" + schema.jdbcUrl(),
                "nolock.create-tables=true")
            .run()) {
      String base = "http://127.0.0.1:" + app.getEnvironment().getProperty("local.server.port");
      HttpResponse<String> alice = post(base, "alice:a");
      HttpResponse<String> bob = post(base, "bob:b");
      HttpResponse<String> aliceAgain = post(base, "alice:a");
      assertThat(alice.statusCode()).isEqualTo(201);
      assertThat(bob.statusCode()).isEqualTo(201);
      assertThat(bob.headers().firstValue("Idempotent-Replayed"))
          .as("bob's request is his own, not a replay of alice's")
          .isEmpty();
      assertThat(aliceAgain.headers().firstValue("Idempotent-Replayed")).hasValue("true");
      assertThat(aliceAgain.body()).isEqualTo(alice.body());
      assertThat(schema.dsl().fetchCount(org.jooq.impl.DSL.table("idem_notes"))).isEqualTo(2);
      assertThat(post(base, null).statusCode())
          .as("no credentials: Spring Security's 401")
          .isEqualTo(401);
    }
  }

  private static HttpResponse<String> post(String base, String credentials) throws Exception {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(base + "/notes"))
            .header("Content-Type", "text/plain")
            .header("Idempotency-Key", "shared-key")
            .POST(HttpRequest.BodyPublishers.ofString("milk"));
    if (credentials != null) {
      request.header(
          "Authorization",
          "Basic "
              + Base64.getEncoder().encodeToString(credentials.getBytes(StandardCharsets.UTF_8)));
    }
    return HttpClient.newHttpClient().send(request.build(), HttpResponse.BodyHandlers.ofString());
  }
}
