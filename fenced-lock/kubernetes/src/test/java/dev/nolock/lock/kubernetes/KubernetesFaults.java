package dev.nolock.lock.kubernetes;

import dev.nolock.testkit.ArmedFault;
import dev.nolock.testkit.FaultKind;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.http.BasicBuilder;
import io.fabric8.kubernetes.client.http.HttpRequest;
import io.fabric8.kubernetes.client.http.Interceptor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest.BodyPublishers;
import java.net.http.HttpResponse.BodyHandlers;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;

/**
 * A fabric8 {@link KubernetesClient} whose HTTP layer loses one request or one answer on purpose:
 * the fault a client meets when its connection drops mid-call. It is an {@link Interceptor}, whose
 * {@code before} fabric8 runs on every attempt, below its own retry, so fabric8 decides what
 * happens next, as it would in production.
 *
 * <p>What fabric8 8.0 does after such a fault ({@code StandardHttpClient.shouldRetry}): it resends
 * any request, a POST or PUT included, after an {@link IOException} (and after 429 or 5xx), up to
 * {@code requestRetryBackoffLimit} times (10 by default) with exponential back-off from {@code
 * requestRetryBackoffInterval}. So a create whose answer was lost is resent and meets 409
 * AlreadyExists (its own object), and an update meets 409 Conflict (its own write changed the
 * {@code resourceVersion}): the caller sees a lost race that it won.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>{@link #client(KubernetesClient)} talks to the same API server as the given client, through
 *       this interceptor; every request passes untouched except the one a fault is armed for.
 *   <li>{@link #onNext} arms a fault for the next request that a predicate accepts. It fires once:
 *       <ul>
 *         <li>{@link FaultKind#ANSWER_LOST}: the request (method, URI, content type, body) is sent
 *             to the API server on the caller's behalf, which applies it and answers; the answer is
 *             discarded, {@code meanwhile} runs, and the caller's attempt then fails to connect (an
 *             {@link IOException}), as a connection that dropped after the server wrote its answer
 *             would.
 *         <li>{@link FaultKind#REQUEST_LOST}: {@code meanwhile} runs, and the attempt fails to
 *             connect; the server never sees it.
 *       </ul>
 *   <li>{@code meanwhile} runs on the calling thread, before fabric8's request timeout starts.
 *   <li>A fault counts the {@linkplain ArmedFault#attempts() requests} it matched since it was
 *       armed, the lost one included: fabric8's resends show up there.
 * </ol>
 */
final class KubernetesFaults implements Interceptor {

  private final List<ArmedFault<HttpRequest>> armed = new CopyOnWriteArrayList<>();
  private final HttpClient replay =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private final URI nowhere = closedPort();

  /** A client to {@code base}'s API server whose requests go through this interceptor. */
  KubernetesClient client(KubernetesClient base) {
    Config config = base.getConfiguration();
    return new KubernetesClientBuilder()
        .withConfig(config)
        .withHttpClientBuilderConsumer(http -> http.addOrReplaceInterceptor("faults", this))
        .build();
  }

  /**
   * Arms {@code kind} for the next request that {@code request} accepts (its {@code toString()}
   * names the fault).
   */
  ArmedFault<HttpRequest> onNext(
      Predicate<HttpRequest> request, FaultKind kind, Runnable meanwhile) {
    ArmedFault<HttpRequest> fault =
        new ArmedFault<>(
            String.valueOf(Objects.requireNonNull(request, "request")), request, kind, meanwhile);
    armed.add(fault);
    return fault;
  }

  @Override
  public void before(BasicBuilder builder, HttpRequest request, RequestTags tags) {
    ArmedFault<HttpRequest> fault = ArmedFault.fireFirst(armed, request);
    if (fault == null) {
      return;
    }
    if (fault.kind() == FaultKind.ANSWER_LOST) {
      applyAndDiscardTheAnswer(request);
    }
    fault.meanwhile().run();
    builder.uri(nowhere.resolve(request.uri().getRawPath()));
  }

  private void applyAndDiscardTheAnswer(HttpRequest request) {
    String body = request.bodyString();
    var send =
        java.net.http.HttpRequest.newBuilder(request.uri())
            .timeout(Duration.ofSeconds(10))
            .method(
                request.method(),
                body == null ? BodyPublishers.noBody() : BodyPublishers.ofString(body));
    String contentType = request.header("Content-Type");
    if (contentType != null) {
      send.header("Content-Type", contentType);
    }
    try {
      replay.send(send.build(), BodyHandlers.discarding());
    } catch (IOException e) {
      throw new UncheckedIOException("KubernetesFaults could not send " + request.uri(), e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }

  /** A loopback port nothing listens on: connecting to it fails at once. */
  private static URI closedPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return URI.create("http://127.0.0.1:" + socket.getLocalPort() + "/");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public String toString() {
    return "KubernetesFaults" + armed;
  }
}
