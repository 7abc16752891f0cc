package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import dev.nolock.testkit.internal.UniqueNames;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Connects a test class to the real Kafka broker: resolves {@link KafkaBroker}.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>a bootstrap server must accept a TCP connection, else the class fails with {@link
 *       ServerUnreachableException} naming {@code scripts/services up kafka} (Kafka's own clients
 *       would retry quietly until their timeouts run out);
 *   <li>one {@link KafkaBroker} with one admin client per class ({@code @Nested} classes share it),
 *       with a 10 s request timeout and a 30 s API timeout;
 *   <li>after the class the admin client is closed. Producers and consumers the test makes are its
 *       own to close.
 * </ol>
 *
 * Needs {@code org.apache.kafka:kafka-clients}.
 */
public final class KafkaExtension implements BeforeAllCallback, ParameterResolver {

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public KafkaExtension() {
    this(Endpoints.fromEnvironment());
  }

  public KafkaExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    broker(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == KafkaBroker.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return broker(context);
  }

  private KafkaBroker broker(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context, KafkaExtension.class, endpoints, KafkaBroker.class, this::create);
  }

  private Closing<KafkaBroker> create() {
    String bootstrap = endpoints.kafkaBootstrap();
    Reachability.requireReachable(
        Server.KAFKA, HostPort.ofBootstrapServers(bootstrap, Server.KAFKA));
    String classToken = UniqueNames.hex12();
    Admin admin =
        Admin.create(
            Map.<String, Object>of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrap,
                AdminClientConfig.CLIENT_ID_CONFIG,
                "nolock-testkit-" + classToken,
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                10_000,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG,
                30_000));
    return new Closing<>(
        new KafkaBroker(bootstrap, admin, classToken), () -> admin.close(Duration.ofSeconds(5)));
  }
}
