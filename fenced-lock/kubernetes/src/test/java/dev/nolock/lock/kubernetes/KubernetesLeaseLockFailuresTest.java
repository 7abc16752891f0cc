package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import io.fabric8.kubernetes.api.model.StatusBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/**
 * API failures other than a lost race (409) or a missing object (404) are {@link
 * BackendUnavailableException}s: "retry later", nothing known about whether the call took effect.
 * The 403 and 500 answers come from the mock server in expectations mode (it answers what it is
 * told to), the unreachable server from a closed port.
 */
class KubernetesLeaseLockFailuresTest {

  private static final Duration TTL = Duration.ofSeconds(10);

  @Test
  void anUnreachableApiServerIsBackendUnavailable() throws IOException {
    int closedPort;
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      closedPort = socket.getLocalPort();
    }
    try (KubernetesClient client = clientWithoutRetries("http://127.0.0.1:" + closedPort)) {
      KubernetesLeaseLockBackend backend =
          KubernetesLeaseLockBackend.create(
              client, KubernetesLeaseLockConfig.custom().namespace("billing").build());

      assertThatThrownBy(() -> backend.tryAcquire("invoice-42", "A", TTL))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("read lock \"invoice-42\"")
          .hasMessageContaining("caused by")
          .hasMessageContaining("Retry later");
      assertThatThrownBy(() -> backend.release("invoice-42", "A", FencingToken.of(1)))
          .isInstanceOf(BackendUnavailableException.class);
    }
  }

  /**
   * fabric8 retries failed requests (connection failures, 5xx) with exponential backoff, 10 times
   * by default; these tests want the first answer.
   */
  private static KubernetesClient clientWithoutRetries(String url) {
    Config config =
        new ConfigBuilder(Config.empty())
            .withMasterUrl(url)
            .withRequestRetryBackoffLimit(0)
            .withConnectionTimeout(2_000)
            .withRequestTimeout(2_000)
            .build();
    return new KubernetesClientBuilder().withConfig(config).build();
  }

  @Test
  void forbiddenIsBackendUnavailableAndPointsAtTheRbacExample() {
    KubernetesMockServer server = new KubernetesMockServer(false);
    server.init(InetAddress.getLoopbackAddress(), 0);
    try (KubernetesClient client = clientWithoutRetries(server.url("/"))) {
      String path = "/apis/coordination.k8s.io/v1/namespaces/billing/leases/nolock-";
      server
          .expect()
          .get()
          .withPath(path + "forbidden")
          .andReturn(403, new StatusBuilder().withCode(403).withReason("Forbidden").build())
          .always();
      server
          .expect()
          .get()
          .withPath(path + "broken")
          .andReturn(500, new StatusBuilder().withCode(500).withMessage("etcd timeout").build())
          .always();
      KubernetesLeaseLockBackend backend =
          KubernetesLeaseLockBackend.create(
              client, KubernetesLeaseLockConfig.custom().namespace("billing").build());

      assertThatThrownBy(() -> backend.tryAcquire("forbidden", "A", TTL))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("HTTP 403")
          .hasMessageContaining("get and update on this lock's Lease")
          .hasMessageContaining("resourceNames")
          .hasMessageContaining("create on leases unless the Lease is created beforehand")
          .hasMessageContaining("rbac.yaml");
      assertThatThrownBy(() -> backend.tryAcquire("broken", "A", TTL))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("HTTP 500");
    } finally {
      server.destroy();
    }
  }
}
