package dev.nolock.spring;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.InputStream;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.springframework.boot.SpringBootVersion;

/**
 * These modules test with the third-party versions Spring Boot's BOM selects, as an application on
 * Boot runs them. The build sets those versions by hand (the root's own versions would otherwise
 * win over the imported BOM); this test reads Boot's BOM from the local repository and fails when a
 * jar on the test classpath is another version than the BOM names.
 */
class SpringBootVersionsTest {

  private static final Pattern PROPERTY = Pattern.compile("<([a-z0-9.-]+\\.version)>([^<]+)<");

  @ParameterizedTest(name = "{0}")
  @CsvSource({
    "jooq, org.jooq.DSLContext, jooq.version",
    "postgresql, org.postgresql.Driver, postgresql.version",
    "HikariCP, com.zaxxer.hikari.HikariDataSource, hikaricp.version",
    "kafka-clients, org.apache.kafka.clients.consumer.KafkaConsumer, kafka.version",
    "lettuce-core, io.lettuce.core.RedisClient, lettuce.version",
    "micrometer-core, io.micrometer.core.instrument.MeterRegistry, micrometer.version",
    "slf4j-api, org.slf4j.Logger, slf4j.version",
    "junit-jupiter-api, org.junit.jupiter.api.Test, junit-jupiter.version",
  })
  void theJarOnTheClasspathIsTheVersionBootsBomSelects(
      String artifact, String className, String property) throws Exception {
    String expected = bomProperties().getProperty(property);
    assertThat(expected).as("Boot's BOM names %s", property).isNotNull();

    assertThat(jarOf(Class.forName(className)).getFileName().toString())
        .as("the jar of %s", className)
        .isEqualTo(artifact + "-" + expected + ".jar");
  }

  /** Boot's BOM, found beside the spring-boot jar in the local repository. */
  private static Properties bomProperties() throws Exception {
    String version = SpringBootVersion.getVersion();
    Path bootJar = jarOf(SpringBootVersion.class);
    Path bom =
        bootJar
            .getParent() // version
            .getParent() // spring-boot
            .resolveSibling("spring-boot-dependencies")
            .resolve(version)
            .resolve("spring-boot-dependencies-" + version + ".pom");
    Properties properties = new Properties();
    try (InputStream in = Files.newInputStream(bom)) {
      Matcher m = PROPERTY.matcher(new String(in.readAllBytes(), "UTF-8"));
      while (m.find()) {
        properties.setProperty(m.group(1), m.group(2));
      }
    }
    return properties;
  }

  private static Path jarOf(Class<?> type) throws URISyntaxException {
    return Path.of(type.getProtectionDomain().getCodeSource().getLocation().toURI());
  }
}
