package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import io.etcd.jetcd.Client;
import java.net.URI;
import java.time.Duration;
import java.util.Arrays;
import java.util.Objects;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Connects a test class to the real etcd server: resolves a jetcd {@link Client}.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>an endpoint must accept a TCP connection, else the class fails with {@link
 *       ServerUnreachableException} naming {@code scripts/services up etcd} (jetcd itself would
 *       keep retrying);
 *   <li>one client per class ({@code @Nested} classes share it);
 *   <li>after the class the client is closed. Keys are not deleted: put them under a prefix of your
 *       own and delete it, or use unique keys.
 * </ol>
 *
 * Needs {@code io.etcd:jetcd-core}.
 */
public final class EtcdExtension implements BeforeAllCallback, ParameterResolver {

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public EtcdExtension() {
    this(Endpoints.fromEnvironment());
  }

  public EtcdExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    client(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == Client.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return client(context);
  }

  private Client client(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context, EtcdExtension.class, endpoints, Client.class, this::create);
  }

  private Closing<Client> create() {
    String endpoint = endpoints.etcdEndpoint();
    Reachability.requireReachable(
        Server.ETCD,
        HostPort.ofHttpEndpoints(endpoint, Server.ETCD, Endpoints.DEFAULT_ETCD_ENDPOINT));
    URI[] uris =
        Arrays.stream(endpoint.split(",")).map(String::trim).map(URI::create).toArray(URI[]::new);
    Client client = Client.builder().endpoints(uris).connectTimeout(Duration.ofSeconds(5)).build();
    return new Closing<>(client, client::close);
  }
}
