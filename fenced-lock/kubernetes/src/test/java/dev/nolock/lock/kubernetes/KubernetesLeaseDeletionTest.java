package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.client.dsl.Resource;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The token counter lives in the Lease, so deleting the Lease would restart the tokens at 1 and a
 * fence that remembers a higher token would refuse every new holder, with no error anywhere. The
 * backend protects the Lease with a finalizer, refuses a Lease that is being deleted, and refuses,
 * loudly, to grant a token lower than one it has already seen for the name.
 *
 * <p>fabric8's mock API server in CRUD mode honours finalizers as the API server does: a {@code
 * DELETE} of an object with finalizers only sets its {@code deletionTimestamp}, and the object goes
 * once an update or patch leaves it without finalizers. So every step below is the API call an
 * operator's {@code kubectl} would send.
 */
class KubernetesLeaseDeletionTest {

  private static final Duration TTL = Duration.ofSeconds(30);

  private static CrudMockApiServer server;
  private static KubernetesLeaseLockConfig config;

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    config = KubernetesLeaseLockConfig.custom().namespace(CrudMockApiServer.NAMESPACE).build();
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  private static String name(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  private static KubernetesLeaseLockBackend newProcess() {
    return KubernetesLeaseLockBackend.create(server.client(), config);
  }

  private static Resource<Lease> lease(String name) {
    return server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .withName(config.leaseName(name));
  }

  /** {@code kubectl delete lease}: with a finalizer on it, the Lease stays, marked for deletion. */
  private static void kubectlDelete(String name) {
    lease(name).delete();
  }

  /**
   * {@code kubectl patch lease ... --type=json -p
   * '[{"op":"remove","path":"/metadata/finalizers"}]'}.
   */
  private static void kubectlRemoveFinalizers(String name) {
    lease(name)
        .edit(
            l ->
                new LeaseBuilder(l).editMetadata().withFinalizers(List.of()).endMetadata().build());
  }

  /** The exception a call refuses with; an assertion error naming what it returned otherwise. */
  private static IllegalStateException refusal(Supplier<?> call) {
    Object returned;
    try {
      returned = call.get();
    } catch (IllegalStateException e) {
      return e;
    }
    throw new AssertionError("expected a refusal, but the call returned " + returned);
  }

  @Test
  void everyGrantPutsTheFinalizerOnTheLeaseSoThatADeleteOnlyMarksIt() {
    KubernetesLeaseLockBackend backend = newProcess();
    String created = name("created");
    backend.tryAcquire(created, "A", TTL).get();
    assertThat(lease(created).get().getMetadata().getFinalizers())
        .as("the finalizer on a Lease the backend created")
        .containsExactly(KubernetesLeaseLockBackend.FINALIZER);

    // A free Lease created beforehand without it (rbac.yaml's manifest) gets it on its first grant.
    String precreated = name("precreated");
    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder()
                .withNewMetadata()
                .withName(config.leaseName(precreated))
                .withFinalizers("example.com/keep")
                .endMetadata()
                .withNewSpec()
                .withLeaseTransitions(7)
                .endSpec()
                .build())
        .create();
    assertThat(backend.tryAcquire(precreated, "A", TTL)).contains(FencingToken.of(8));
    assertThat(lease(precreated).get().getMetadata().getFinalizers())
        .as("the finalizer added next to someone else's")
        .containsExactly("example.com/keep", KubernetesLeaseLockBackend.FINALIZER);

    // A held Lease without it (written by an earlier version, or stripped by hand) gets it back on
    // its holder's next renewal.
    kubectlRemoveFinalizers(created);
    assertThat(backend.renew(created, "A", FencingToken.of(1), TTL)).isTrue();
    assertThat(lease(created).get().getMetadata().getFinalizers())
        .as("the finalizer after a renewal")
        .containsExactly(KubernetesLeaseLockBackend.FINALIZER);

    kubectlDelete(created);
    Lease marked = lease(created).get();
    assertThat(marked).as("the Lease after kubectl delete").isNotNull();
    assertThat(marked.getMetadata().getDeletionTimestamp()).isNotNull();
    assertThat(marked.getSpec().getLeaseTransitions()).isEqualTo(1);
  }

  @Test
  void aLeaseBeingDeletedIsRefusedWithAClearErrorButItsHolderMayStillRelease() {
    KubernetesLeaseLockBackend backend = newProcess();
    String name = name("deleting");
    FencingToken held = backend.tryAcquire(name, "A", TTL).get();
    backend.release(name, "A", held);
    FencingToken again = backend.tryAcquire(name, "A", TTL).get();

    kubectlDelete(name);

    assertThat(refusal(() -> backend.tryAcquire(name, "B", TTL)))
        .as("an acquisition of a Lease being deleted")
        .hasMessageContaining("is being deleted")
        .hasMessageContaining(KubernetesLeaseLockBackend.FINALIZER)
        .hasMessageContaining("leaseTransitions 2");
    assertThat(refusal(() -> newProcess().tryAcquire(name, "C", TTL)))
        .as("the same in a process that never saw the Lease before")
        .hasMessageContaining("is being deleted");
    assertThatThrownBy(() -> backend.renew(name, "A", again, TTL))
        .as("a renewal of a grant on a Lease being deleted")
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is being deleted");
    assertThat(backend.release(name, "A", again)).as("giving the Lease up").isTrue();
    assertThat(lease(name).get().getSpec().getHolderIdentity()).isNull();
    assertThat(refusal(() -> backend.tryAcquire(name, "B", TTL)))
        .hasMessageContaining("is being deleted");
  }

  @Test
  void aLeaseDeletedForGoodOrReCreatedIsReportedAndNeverGrantsALowerToken() {
    KubernetesLeaseLockBackend backend = newProcess();
    String name = name("recreated");
    for (int grant = 1; grant <= 3; grant++) {
      FencingToken token = backend.tryAcquire(name, "A", TTL).get();
      backend.release(name, "A", token);
    }

    // The operator removes the finalizer and deletes the Lease: it is gone.
    kubectlRemoveFinalizers(name);
    kubectlDelete(name);
    assertThat(lease(name).get()).as("the Lease after its finalizer was removed").isNull();

    assertThat(refusal(() -> backend.tryAcquire(name, "B", TTL)))
        .as("re-creating the Lease after it was deleted at token 3")
        .hasMessageContaining("was deleted")
        .hasMessageContaining("leaseTransitions 3");
    assertThat(lease(name).get()).as("nothing was created").isNull();

    // Negative control: a process that never saw the Lease cannot know, and starts again at 1.
    KubernetesLeaseLockBackend fresh = newProcess();
    Option<FencingToken> restarted = fresh.tryAcquire(name, "C", TTL);
    assertThat(restarted).contains(FencingToken.of(1));
    fresh.release(name, "C", restarted.get());

    assertThat(refusal(() -> backend.tryAcquire(name, "B", TTL)))
        .as("a grant on the re-created Lease")
        .hasMessageContaining("was deleted and re-created (uid")
        .hasMessageContaining("leaseTransitions 1")
        .hasMessageContaining("3");

    // The remedy: set the counter back to at least the highest token the fence has seen.
    lease(name).edit(l -> new LeaseBuilder(l).editSpec().withLeaseTransitions(3).endSpec().build());
    assertThat(backend.tryAcquire(name, "B", TTL)).contains(FencingToken.of(4));
  }
}
