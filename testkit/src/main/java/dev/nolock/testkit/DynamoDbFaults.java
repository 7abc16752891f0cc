package dev.nolock.testkit;

import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import java.io.IOException;
import java.io.InputStream;
import java.net.URI;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Pattern;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.ExecutableHttpRequest;
import software.amazon.awssdk.http.HttpExecuteRequest;
import software.amazon.awssdk.http.HttpExecuteResponse;
import software.amazon.awssdk.http.SdkHttpClient;
import software.amazon.awssdk.http.apache5.Apache5HttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * An AWS SDK v2 {@link DynamoDbClient} whose HTTP layer loses one request or one answer on purpose,
 * against the real DynamoDB-compatible server: the fault a client meets when a connection drops
 * mid-call, so that the SDK's own retry (or the library under test, when it turns the SDK's retry
 * off) decides what happens next.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>{@link #client()} is configured as {@link DynamoDbExtension#newClient(String)}'s (region,
 *       dummy credentials, the Apache HttpClient 5 transport, the same timeouts, the SDK's default
 *       retry strategy), and its transport is wrapped: every request goes to the real server except
 *       the one a fault is armed for.
 *   <li>{@link #onNext(String, FaultKind)} arms a fault for the next request of one DynamoDB
 *       operation, named as in its {@code X-Amz-Target} header ({@code "UpdateItem"}, {@code
 *       "PutItem"}, {@code "DeleteItem"}, ...). It fires once, on the first such request sent after
 *       arming:
 *       <ul>
 *         <li>{@link FaultKind#ANSWER_LOST}: the request is sent to the server, which applies it
 *             and answers; the answer is read to the end and discarded, and the call fails with an
 *             {@link IOException}, as a connection that dropped after the server wrote its answer
 *             would.
 *         <li>{@link FaultKind#REQUEST_LOST}: the call fails with an {@link IOException} before
 *             anything is sent; the server never sees it.
 *       </ul>
 *   <li>A fault counts the {@linkplain Fault#attempts() attempts} of its operation sent through
 *       this client from the moment it was armed, the lost one included: a test asserts that the
 *       SDK (or the library) resent the request with {@link Fault#assertRetried()}.
 *   <li>Faults armed for the same operation fire one per request, in the order they were armed.
 *   <li>{@link #disarmAll()} drops the faults that have not fired: a fault armed for a call that
 *       never sent its operation (an update of a missing item reads and stops) would otherwise fire
 *       on a later call.
 * </ol>
 *
 * <p>A test of what happens <em>between</em> the lost answer and the resend (another writer gets
 * in) passes a {@code meanwhile} action to {@link #onNext(String, FaultKind, Runnable)}; it runs on
 * the calling thread after the server applied the request and before the caller sees the failure.
 * It must use another client: a request of this client from inside the action would be counted.
 *
 * <p>Thread-safe. Close it after the test: it closes the client and its transport. Needs {@code
 * software.amazon.awssdk:dynamodb} and {@code software.amazon.awssdk:apache5-client}.
 */
// Written by hand: an SDK ExecutionInterceptor can fail a call after the server answered, but not
// with the IOException of a dropped connection that the SDK's retry treats as such.
public final class DynamoDbFaults implements AutoCloseable {

  private static final String TARGET_HEADER = "X-Amz-Target";
  private static final Pattern OPERATION = Pattern.compile("[A-Z][A-Za-z]{2,63}");

  private final SdkHttpClient transport;
  private final DynamoDbClient client;
  private final List<ArmedFault<String>> armed = new CopyOnWriteArrayList<>();

  private DynamoDbFaults(String endpoint) {
    this.transport =
        new LosingHttpClient(
            Apache5HttpClient.builder()
                .connectionTimeout(Duration.ofSeconds(2))
                .socketTimeout(Duration.ofSeconds(10))
                .build());
    this.client =
        DynamoDbClient.builder()
            .endpointOverride(URI.create(endpoint))
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("nolock", "nolock")))
            .httpClient(transport)
            .overrideConfiguration(override -> override.apiCallTimeout(Duration.ofSeconds(30)))
            .build();
  }

  /** Faults on the server named by {@link Endpoints#fromEnvironment()}. */
  public static DynamoDbFaults create() {
    return create(Endpoints.fromEnvironment());
  }

  /**
   * Faults on {@code endpoints}' DynamoDB-compatible server.
   *
   * @throws ServerUnreachableException when it does not accept a TCP connection
   */
  public static DynamoDbFaults create(Endpoints endpoints) {
    String endpoint = Objects.requireNonNull(endpoints, "endpoints").dynamoDbEndpoint();
    Reachability.requireReachable(
        Server.DYNAMODB,
        HostPort.ofHttpEndpoints(endpoint, Server.DYNAMODB, Endpoints.DEFAULT_DYNAMODB_ENDPOINT));
    return new DynamoDbFaults(endpoint);
  }

  /** The client whose requests go through the faults; it stays this object's, do not close it. */
  public DynamoDbClient client() {
    return client;
  }

  /**
   * Arms {@code kind} for the next request of {@code operation} (e.g. {@code "UpdateItem"}).
   *
   * @return the armed fault, to assert that it fired and how often the operation was sent
   */
  public Fault onNext(String operation, FaultKind kind) {
    return onNext(operation, kind, () -> {});
  }

  /**
   * Like {@link #onNext(String, FaultKind)}, and runs {@code meanwhile} when the fault fires, after
   * the server applied the request ({@link FaultKind#ANSWER_LOST}) and before the caller sees the
   * failure: the place of another writer's request that lands between a lost answer and its resend.
   */
  public Fault onNext(String operation, FaultKind kind, Runnable meanwhile) {
    if (operation == null || !OPERATION.matcher(operation).matches()) {
      throw new IllegalArgumentException(
          "The operation "
              + (operation == null ? "is null" : "\"" + operation + "\" is not a DynamoDB action")
              + ": pass the action as in the X-Amz-Target header, e.g. \"UpdateItem\".");
    }
    ArmedFault<String> fault =
        new ArmedFault<>(
            operation,
            operation::equals,
            Objects.requireNonNull(kind, "kind"),
            Objects.requireNonNull(meanwhile, "meanwhile"));
    armed.add(fault);
    return new Fault(operation, fault);
  }

  /** Disarms every fault that has not fired yet; fired ones keep counting their attempts. */
  public void disarmAll() {
    armed.removeIf(fault -> !fault.fired());
  }

  @Override
  public void close() {
    client.close();
    transport.close();
  }

  @Override
  public String toString() {
    return "DynamoDbFaults" + armed;
  }

  /**
   * The transport: counts each request of an armed operation, and fires the first unfired fault.
   */
  private final class LosingHttpClient implements SdkHttpClient {
    private final SdkHttpClient real;

    LosingHttpClient(SdkHttpClient real) {
      this.real = real;
    }

    @Override
    public ExecutableHttpRequest prepareRequest(HttpExecuteRequest request) {
      String operation = operation(request);
      ExecutableHttpRequest send = real.prepareRequest(request);
      return new ExecutableHttpRequest() {
        @Override
        public HttpExecuteResponse call() throws IOException {
          ArmedFault<String> fault = ArmedFault.fireFirst(armed, operation);
          if (fault == null) {
            return send.call();
          }
          if (fault.kind() == FaultKind.REQUEST_LOST) {
            send.abort();
          } else {
            HttpExecuteResponse answer = send.call();
            if (answer.responseBody().isPresent()) {
              try (InputStream body = answer.responseBody().get()) {
                body.readAllBytes();
              }
            }
          }
          fault.meanwhile().run();
          throw new IOException(
              "Connection reset: "
                  + fault
                  + (fault.kind() == FaultKind.ANSWER_LOST
                      ? " (the server applied the request and answered; the answer was dropped)"
                      : " (dropped before the server saw it)"));
        }

        @Override
        public void abort() {
          send.abort();
        }
      };
    }

    @Override
    public String clientName() {
      return "DynamoDbFaults(" + real.clientName() + ")";
    }

    @Override
    public void close() {
      real.close();
    }
  }

  private static String operation(HttpExecuteRequest request) {
    String target = request.httpRequest().firstMatchingHeader(TARGET_HEADER).orElse("");
    return target.substring(target.lastIndexOf('.') + 1);
  }

  /** One armed fault. */
  public static final class Fault implements InjectedFault {
    private final String operation;
    private final ArmedFault<String> armed;

    private Fault(String operation, ArmedFault<String> armed) {
      this.operation = operation;
      this.armed = armed;
    }

    /** The DynamoDB operation it is armed for. */
    public String operation() {
      return operation;
    }

    public FaultKind kind() {
      return armed.kind();
    }

    @Override
    public boolean fired() {
      return armed.fired();
    }

    /**
     * Requests of {@link #operation()} sent through the client since this fault was armed,
     * including the lost one and every resend, by the SDK or by the code under test.
     */
    public int attempts() {
      return armed.attempts();
    }

    /**
     * Fails unless the fault fired and the operation was sent again after it: the SDK's retry, or
     * the library's own, did run.
     *
     * @throws AssertionError naming the fault and the attempts counted
     */
    public void assertRetried() {
      assertFired();
      if (attempts() < 2) {
        throw new AssertionError(
            this + " fired, but " + operation + " was not sent again: nothing retried it.");
      }
    }

    @Override
    public String toString() {
      return armed.toString();
    }
  }
}
