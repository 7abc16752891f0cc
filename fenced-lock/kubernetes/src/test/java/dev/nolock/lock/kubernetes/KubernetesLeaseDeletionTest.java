package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.ManualLeaseClock;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.client.dsl.Resource;
import io.fabric8.kubernetes.client.dsl.base.PatchContext;
import io.fabric8.kubernetes.client.dsl.base.PatchType;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.vavr.control.Option;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.function.Supplier;
import java.util.regex.Pattern;
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

  /**
   * The README's teardown order: {@code kubectl delete} first (the Lease is marked, and every
   * renewal from then on is refused without writing), then remove the finalizer (the Lease goes at
   * once). Negative control: the other order leaves a window in which the holder's renewal puts the
   * finalizer back, and the {@code kubectl delete} that follows only marks the Lease.
   */
  @Test
  void deletingFirstThenRemovingTheFinalizerRemovesTheLeaseEvenWhileItsHolderRenews() {
    KubernetesLeaseLockBackend backend = newProcess();
    String name = name("teardown");
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();

    kubectlDelete(name);
    String marked = lease(name).get().getMetadata().getResourceVersion();
    assertThatThrownBy(() -> backend.renew(name, "A", token, TTL))
        .as("the holder's renewal between the delete and the finalizer's removal")
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is being deleted");
    assertThat(lease(name).get().getMetadata().getResourceVersion())
        .as("the refused renewal wrote nothing")
        .isEqualTo(marked);
    removeOurFinalizer(name);
    assertThat(lease(name).get()).as("the Lease after delete, then finalizer removal").isNull();

    // Negative control: the finalizer removed first, a renewal in between, then the delete.
    String wrongOrder = name("wrong-order");
    FencingToken other = backend.tryAcquire(wrongOrder, "A", TTL).get();
    removeOurFinalizer(wrongOrder);
    assertThat(backend.renew(wrongOrder, "A", other, TTL)).isTrue();
    kubectlDelete(wrongOrder);
    Lease stuck = lease(wrongOrder).get();
    assertThat(stuck).as("the Lease after finalizer removal, a renewal, then delete").isNotNull();
    assertThat(stuck.getMetadata().getDeletionTimestamp()).isNotNull();
    assertThat(stuck.getMetadata().getFinalizers())
        .containsExactly(KubernetesLeaseLockBackend.FINALIZER);
  }

  /**
   * The README's namespace teardown: per Lease carrying the finalizer, a JSON patch that tests the
   * finalizers just read and replaces them with the same minus ours (what its {@code jq} builds),
   * so that someone else's finalizer is kept, and one added meanwhile makes the patch fail instead
   * of being overwritten.
   */
  private static void removeOurFinalizer(String name) {
    List<String> finalizers = lease(name).get().getMetadata().getFinalizers();
    List<String> rest = new ArrayList<>(finalizers);
    rest.remove(KubernetesLeaseLockBackend.FINALIZER);
    List<Map<String, Object>> patch =
        List.of(
            Map.of("op", "test", "path", "/metadata/finalizers", "value", finalizers),
            Map.of("op", "replace", "path", "/metadata/finalizers", "value", rest));
    lease(name).patch(PatchContext.of(PatchType.JSON), Serialization.asJson(patch));
  }

  @Test
  void theTeardownPatchKeepsOthersFinalizers() {
    KubernetesLeaseLockBackend backend = newProcess();
    String name = name("others");
    backend.tryAcquire(name, "A", TTL).get();
    lease(name)
        .edit(
            l ->
                new LeaseBuilder(l)
                    .editMetadata()
                    .addToFinalizers("example.com/keep")
                    .endMetadata()
                    .build());

    kubectlDelete(name);
    removeOurFinalizer(name);

    assertThat(lease(name).get().getMetadata().getFinalizers())
        .as("the finalizers left")
        .containsExactly("example.com/keep");
  }

  /**
   * The highest token per lock name is remembered for at most {@link
   * KubernetesLeaseLockConfig#rememberedNames} names, least recently used forgotten first. A
   * forgotten name falls back to what a freshly started process does: a Lease deleted for good is
   * created again at token 1 (the fence still refuses that lower token); a remembered one is
   * refused.
   */
  @Test
  void theRememberedTokensAreBoundedAndAForgottenNameBehavesLikeAFreshProcess() {
    KubernetesLeaseLockBackend backend =
        KubernetesLeaseLockBackend.create(
            server.client(),
            KubernetesLeaseLockConfig.custom()
                .namespace(CrudMockApiServer.NAMESPACE)
                .rememberedNames(2)
                .build());
    String oldest = name("oldest");
    String inspected = name("inspected");
    String newest = name("newest");
    backend.release(oldest, "A", backend.tryAcquire(oldest, "A", TTL).get());
    newProcess().tryAcquire(inspected, "B", TTL).get();
    backend.inspect(inspected);
    backend.release(newest, "A", backend.tryAcquire(newest, "A", TTL).get());

    assertThat(backend.rememberedNames()).as("the names remembered with a cap of 2").isEqualTo(2);

    for (String gone : List.of(oldest, newest)) {
      kubectlDelete(gone);
      removeOurFinalizer(gone);
    }
    assertThat(backend.tryAcquire(oldest, "A", TTL))
        .as("the least recently used name, forgotten: like a fresh process")
        .contains(FencingToken.of(1));
    assertThat(refusal(() -> backend.tryAcquire(newest, "A", TTL)))
        .as("a remembered name")
        .hasMessageContaining("was deleted");
  }

  /**
   * The remedy for a Lease being deleted while held: save it, let the deletion complete, and create
   * it again <em>held</em> by the same holder with its duration, so that every contender waits a
   * full lease from its first look at the new object, and the holder simply renews on. Negative
   * control: re-created free, a contender takes it at once, at a moment the old holder's lease has
   * not run out on the shared clock: two processes would believe they hold the lock.
   */
  @Test
  void theRemedyReCreatesTheLeaseHeldSoThatNoContenderTakesItWhileTheHolderMayStillBelieveIt() {
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockConfig manual =
        KubernetesLeaseLockConfig.custom()
            .namespace(CrudMockApiServer.NAMESPACE)
            .clock(clock)
            .build();
    KubernetesLeaseLockBackend holder = KubernetesLeaseLockBackend.create(server.client(), manual);
    KubernetesLeaseLockBackend contender =
        KubernetesLeaseLockBackend.create(server.client(), manual);

    String held = name("remedy-held");
    FencingToken token = holder.tryAcquire(held, "A", TTL).get();
    kubectlDelete(held);
    Lease saved = lease(held).get();
    removeOurFinalizer(held);
    recreate(saved, true);
    assertThat(contender.tryAcquire(held, "B", TTL)).as("a contender's first look").isEmpty();
    clock.advance(TTL.minusMillis(1));
    assertThat(contender.tryAcquire(held, "B", TTL)).as("a contender at D - 1 ms").isEmpty();
    assertThat(holder.renew(held, "A", token, TTL)).as("the holder renews on").isTrue();
    assertThat(lease(held).get().getMetadata().getFinalizers())
        .containsExactly(KubernetesLeaseLockBackend.FINALIZER);

    // Negative control: the same, re-created free.
    String free = name("remedy-free");
    FencingToken freeToken = holder.tryAcquire(free, "A", TTL).get();
    kubectlDelete(free);
    Lease savedFree = lease(free).get();
    removeOurFinalizer(free);
    recreate(savedFree, false);
    assertThat(contender.tryAcquire(free, "B", TTL))
        .as("a contender on the Lease re-created free, on the instant of the holder's grant")
        .contains(FencingToken.of(freeToken.value() + 1));
  }

  /** Creates {@code saved} again without its server-side fields; without its holder if not held. */
  private static void recreate(Lease saved, boolean held) {
    Lease copy =
        new LeaseBuilder(saved)
            .editMetadata()
            .withUid(null)
            .withResourceVersion(null)
            .withCreationTimestamp(null)
            .withDeletionTimestamp(null)
            .withDeletionGracePeriodSeconds(null)
            .withManagedFields(List.of())
            .endMetadata()
            .build();
    if (!held) {
      copy = new LeaseBuilder(copy).editSpec().withHolderIdentity(null).endSpec().build();
    }
    server.client().leases().inNamespace(CrudMockApiServer.NAMESPACE).resource(copy).create();
  }

  /**
   * A Lease being deleted is refused on every call, but the ERROR is logged once per Lease (uid),
   * not on every renewal interval.
   */
  @Test
  void aLeaseBeingDeletedIsLoggedOnceButRefusedEveryTime() {
    KubernetesLeaseLockBackend backend = newProcess();
    String name = name("logged-once");
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    kubectlDelete(name);

    String logged =
        stderrOf(
            () -> {
              for (int call = 0; call < 3; call++) {
                assertThat(refusal(() -> backend.renew(name, "A", token, TTL)))
                    .hasMessageContaining("is being deleted");
                assertThat(refusal(() -> backend.tryAcquire(name, "B", TTL)))
                    .hasMessageContaining("is being deleted");
              }
            });

    Pattern error =
        Pattern.compile("ERROR .*" + Pattern.quote("\"" + config.leaseName(name) + "\" of lock"));
    assertThat(error.matcher(logged).results().count())
        .as("ERRORs about the Lease being deleted, after 6 refusals")
        .isEqualTo(1);
  }

  /** What {@code action} printed to {@code System.err} (where slf4j-simple logs), echoed on. */
  private static String stderrOf(Runnable action) {
    PrintStream original = System.err;
    ByteArrayOutputStream captured = new ByteArrayOutputStream();
    PrintStream tee =
        new PrintStream(
            new java.io.OutputStream() {
              @Override
              public void write(int b) {
                captured.write(b);
                original.write(b);
              }

              @Override
              public void write(byte[] b, int off, int len) {
                captured.write(b, off, len);
                original.write(b, off, len);
              }
            },
            true,
            StandardCharsets.UTF_8);
    System.setErr(tee);
    try {
      action.run();
    } finally {
      System.setErr(original);
    }
    return captured.toString(StandardCharsets.UTF_8);
  }
}
