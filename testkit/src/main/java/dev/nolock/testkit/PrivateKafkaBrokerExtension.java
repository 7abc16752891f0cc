package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.UUID;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Gives a test class a single-node Kafka of its own: resolves {@link PrivateKafkaBroker}.
 *
 * <p>Guarantees: one broker per class ({@code @Nested} classes share it), started before the class
 * runs with its data and log under {@code target/kafka-broker/<random>/} of the working directory,
 * and killed after the class. The shared broker of {@link KafkaExtension} is not touched.
 */
public final class PrivateKafkaBrokerExtension implements BeforeAllCallback, ParameterResolver {

  @Override
  public void beforeAll(ExtensionContext context) {
    broker(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == PrivateKafkaBroker.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return broker(context);
  }

  private PrivateKafkaBroker broker(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context,
        PrivateKafkaBrokerExtension.class,
        Endpoints.fromEnvironment(),
        PrivateKafkaBroker.class,
        () -> {
          Path directory =
              Path.of("target", "kafka-broker", UUID.randomUUID().toString().substring(0, 8));
          try {
            PrivateKafkaBroker broker = PrivateKafkaBroker.start(directory);
            return new Closing<>(broker, broker::close);
          } catch (IOException e) {
            throw new UncheckedIOException("could not start a Kafka broker in " + directory, e);
          }
        });
  }
}
