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
 * Gives a test class a three-member etcd cluster of its own: resolves {@link EtcdCluster}.
 *
 * <p>Guarantees: one cluster per class ({@code @Nested} classes share it), started before the class
 * runs with its data and logs under {@code target/etcd-cluster/<random>/} of the working directory,
 * and killed after the class. The shared etcd of {@link EtcdExtension} is not touched.
 */
public final class EtcdClusterExtension implements BeforeAllCallback, ParameterResolver {

  @Override
  public void beforeAll(ExtensionContext context) {
    cluster(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == EtcdCluster.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return cluster(context);
  }

  private EtcdCluster cluster(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context,
        EtcdClusterExtension.class,
        Endpoints.fromEnvironment(),
        EtcdCluster.class,
        () -> {
          Path directory =
              Path.of("target", "etcd-cluster", UUID.randomUUID().toString().substring(0, 8));
          try {
            EtcdCluster cluster = EtcdCluster.start(directory);
            return new Closing<>(cluster, cluster::close);
          } catch (IOException e) {
            throw new UncheckedIOException("could not start an etcd cluster in " + directory, e);
          }
        });
  }
}
