package dev.nolock.lock.kubernetes;

import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import java.net.InetAddress;
import java.util.HashMap;
import java.util.UUID;

/**
 * fabric8's mock Kubernetes API server in CRUD mode (it stores what it is sent and assigns
 * resourceVersions), on loopback, with a client for it.
 *
 * <p>Every test of this module depends on one property of it: <b>an update that carries a stale
 * {@code resourceVersion} is refused with 409 Conflict</b>. The backend's safety rests on that
 * precondition; a server that ignored it would let two contenders take the same Lease, and a test
 * against it could not fail. {@code MockApiServerRejectsStaleResourceVersionTest} proves the
 * property, and {@link #start()} checks it again on every server it starts, so that no test ever
 * runs against a mock that does not enforce it (if it ever stopped, this backend would have to be
 * marked blocked rather than tested against it).
 */
final class CrudMockApiServer implements AutoCloseable {

  static final String NAMESPACE = "nolock-test";

  private final KubernetesMockServer server;
  private final KubernetesClient client;

  private CrudMockApiServer(KubernetesMockServer server, KubernetesClient client) {
    this.server = server;
    this.client = client;
  }

  /** A fresh server (no objects) that has just proven it refuses a stale resourceVersion. */
  static CrudMockApiServer start() {
    KubernetesMockServer server =
        new KubernetesMockServer(
            new Context(),
            new MockWebServer(),
            new HashMap<>(),
            new KubernetesCrudDispatcher(),
            false);
    server.init(InetAddress.getLoopbackAddress(), 0);
    CrudMockApiServer started = new CrudMockApiServer(server, server.createClient());
    started.requireStaleResourceVersionIsRejected();
    return started;
  }

  KubernetesClient client() {
    return client;
  }

  /** The Lease as stored, read natively; null when absent. */
  Lease lease(String leaseName) {
    return client.leases().inNamespace(NAMESPACE).withName(leaseName).get();
  }

  @Override
  public void close() {
    client.close();
    server.destroy();
  }

  private void requireStaleResourceVersionIsRejected() {
    Lease created =
        client
            .leases()
            .inNamespace(NAMESPACE)
            .resource(
                new LeaseBuilder()
                    .withNewMetadata()
                    .withName("probe-" + UUID.randomUUID())
                    .withNamespace(NAMESPACE)
                    .endMetadata()
                    .withNewSpec()
                    .withHolderIdentity("first")
                    .endSpec()
                    .build())
            .create();
    client
        .leases()
        .inNamespace(NAMESPACE)
        .resource(
            new LeaseBuilder(created).editSpec().withHolderIdentity("second").endSpec().build())
        .update();
    try {
      client
          .leases()
          .inNamespace(NAMESPACE)
          .resource(
              new LeaseBuilder(created).editSpec().withHolderIdentity("stale").endSpec().build())
          .update();
    } catch (KubernetesClientException e) {
      if (e.getCode() == 409) {
        client.leases().inNamespace(NAMESPACE).resource(created).withGracePeriod(0).delete();
        return;
      }
      throw e;
    }
    close();
    throw new IllegalStateException(
        "The mock API server accepted an update with a stale resourceVersion: tests against it"
            + " cannot fail, so the Kubernetes Lease backend must be marked blocked, not tested"
            + " against it.");
  }
}
