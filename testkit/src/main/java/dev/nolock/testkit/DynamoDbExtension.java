package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import java.net.URI;
import java.time.Duration;
import java.util.Objects;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.apache5.Apache5HttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Connects a test class to the DynamoDB-compatible server (dynalite on these machines): resolves an
 * AWS SDK v2 {@link DynamoDbClient}.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>the endpoint must accept a TCP connection, else the class fails with {@link
 *       ServerUnreachableException} naming {@code scripts/services up dynamodb};
 *   <li>one client per class ({@code @Nested} classes share it), pointed at the endpoint with
 *       {@code endpointOverride}, region {@code us-east-1}, static dummy credentials (never the
 *       machine's AWS profile, so a test can not reach a real AWS account by accident) and the
 *       Apache HttpClient 5 transport with short timeouts;
 *   <li>after the class the client is closed. Tables are not deleted: give them unique names.
 * </ol>
 *
 * dynalite lacks {@code TransactWriteItems}, {@code TransactGetItems}, TTL and PartiQL. Needs
 * {@code software.amazon.awssdk:dynamodb} and {@code software.amazon.awssdk:apache5-client}.
 */
public final class DynamoDbExtension implements BeforeAllCallback, ParameterResolver {

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public DynamoDbExtension() {
    this(Endpoints.fromEnvironment());
  }

  public DynamoDbExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    client(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == DynamoDbClient.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return client(context);
  }

  private DynamoDbClient client(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context, DynamoDbExtension.class, endpoints, DynamoDbClient.class, this::create);
  }

  private Closing<DynamoDbClient> create() {
    String endpoint = endpoints.dynamoDbEndpoint();
    Reachability.requireReachable(
        Server.DYNAMODB,
        HostPort.ofHttpEndpoints(endpoint, Server.DYNAMODB, Endpoints.DEFAULT_DYNAMODB_ENDPOINT));
    DynamoDbClient client = newClient(endpoint);
    return new Closing<>(client, client::close);
  }

  /**
   * A client for the DynamoDB-compatible server at {@code endpoint}, configured as the extension's
   * (us-east-1, dummy static credentials, 2 s connect / 10 s socket / 30 s call timeouts), for code
   * that cannot be handed the extension's, such as a child JVM. The caller closes it.
   */
  public static DynamoDbClient newClient(String endpoint) {
    return DynamoDbClient.builder()
        .endpointOverride(URI.create(endpoint))
        .region(Region.US_EAST_1)
        .credentialsProvider(
            StaticCredentialsProvider.create(AwsBasicCredentials.create("nolock", "nolock")))
        .httpClientBuilder(
            Apache5HttpClient.builder()
                .connectionTimeout(Duration.ofSeconds(2))
                .socketTimeout(Duration.ofSeconds(10)))
        .overrideConfiguration(override -> override.apiCallTimeout(Duration.ofSeconds(30)))
        .build();
  }
}
