package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The property every other test of this module depends on: fabric8's mock API server in CRUD mode
 * refuses a write based on a stale {@code resourceVersion} with HTTP 409, as a real API server
 * does. {@link KubernetesLeaseLockBackend} takes, renews and releases a Lease only through such
 * conditional writes; if the mock accepted stale writes, every test of the backend against it would
 * pass whether the backend were safe or not, and the backend would have to be marked blocked
 * instead. ({@link CrudMockApiServer#start()} re-checks the first property on every server it
 * starts.)
 */
class MockApiServerRejectsStaleResourceVersionTest {

  private static CrudMockApiServer server;
  private static KubernetesClient client;

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    client = server.client();
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  @Test
  void anUpdateFromAStaleResourceVersionIsRejectedWith409AndChangesNothing() {
    Lease first = create("stale", "A");
    Lease second =
        update(new LeaseBuilder(first).editSpec().withHolderIdentity("B").endSpec().build());
    assertThat(second.getMetadata().getResourceVersion())
        .as("an update gives a new resourceVersion")
        .isNotEqualTo(first.getMetadata().getResourceVersion());

    Lease fromTheFirstVersion =
        new LeaseBuilder(first).editSpec().withHolderIdentity("C").endSpec().build();
    assertThatThrownBy(() -> update(fromTheFirstVersion))
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(409));

    Lease stored = server.lease("stale");
    assertThat(stored.getSpec().getHolderIdentity()).isEqualTo("B");
    assertThat(stored.getMetadata().getResourceVersion())
        .isEqualTo(second.getMetadata().getResourceVersion());
    // Control: the same update from the current version is accepted.
    assertThat(
            update(new LeaseBuilder(second).editSpec().withHolderIdentity("C").endSpec().build())
                .getSpec()
                .getHolderIdentity())
        .isEqualTo("C");
  }

  @Test
  void withoutAResourceVersionTheStaleUpdateIsAcceptedSoThePreconditionIsWhatRefusesIt() {
    // Negative control: the 409 above comes from the resourceVersion the update carries, not from
    // anything else about the request.
    Lease first = create("unconditional", "A");
    update(new LeaseBuilder(first).editSpec().withHolderIdentity("B").endSpec().build());

    Lease unconditional =
        new LeaseBuilder(first)
            .editMetadata()
            .withResourceVersion(null)
            .endMetadata()
            .editSpec()
            .withHolderIdentity("C")
            .endSpec()
            .build();
    update(unconditional);

    assertThat(server.lease("unconditional").getSpec().getHolderIdentity()).isEqualTo("C");
  }

  @Test
  void creatingALeaseThatExistsIsRejectedWith409() {
    create("exists", "A");

    assertThatThrownBy(() -> create("exists", "B"))
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(409));
    assertThat(server.lease("exists").getSpec().getHolderIdentity()).isEqualTo("A");
  }

  @Test
  void ofEightConcurrentUpdatesFromOneResourceVersionExactlyOneWins() throws Exception {
    Lease base = create("race", "nobody");
    int threads = 8;
    CountDownLatch go = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    List<Future<Integer>> results = new ArrayList<>();
    try {
      for (int t = 0; t < threads; t++) {
        Lease mine =
            new LeaseBuilder(base).editSpec().withHolderIdentity("racer-" + t).endSpec().build();
        results.add(
            pool.submit(
                () -> {
                  go.await();
                  try {
                    update(mine);
                    return 200;
                  } catch (KubernetesClientException e) {
                    return e.getCode();
                  }
                }));
      }
      go.countDown();
      List<Integer> codes = new ArrayList<>();
      for (Future<Integer> result : results) {
        codes.add(result.get(1, TimeUnit.MINUTES));
      }

      assertThat(codes).hasSize(threads).containsOnly(200, 409);
      assertThat(codes).filteredOn(code -> code == 200).hasSize(1);
    } finally {
      pool.shutdownNow();
    }
    assertThat(server.lease("race").getSpec().getHolderIdentity()).startsWith("racer-");
  }

  private static Lease create(String name, String holder) {
    return client
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder()
                .withNewMetadata()
                .withName(name)
                .withNamespace(CrudMockApiServer.NAMESPACE)
                .endMetadata()
                .withNewSpec()
                .withHolderIdentity(holder)
                .withLeaseDurationSeconds(10)
                .endSpec()
                .build())
        .create();
  }

  private static Lease update(Lease lease) {
    return client.leases().inNamespace(CrudMockApiServer.NAMESPACE).resource(lease).update();
  }
}
