package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.patterns.FencingToken;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * fenced-lock core's {@link LeaderElector} over the Lease backend, on the mock API server in CRUD
 * mode (which refuses stale resourceVersions: {@link
 * MockApiServerRejectsStaleResourceVersionTest}). Each candidate has a backend instance of its own,
 * as separate processes would.
 *
 * <p>The halt on a lost leadership is turned off ({@code haltOnLoss(false)}): it would end the test
 * JVM, and its injection point is package-private to the core module, where {@code
 * LeaderElectorTest} covers it.
 */
class KubernetesLeaderElectionTest {

  private static final Duration LEASE_DURATION = Duration.ofSeconds(3);

  private static CrudMockApiServer server;
  private static KubernetesLeaseLockConfig config;

  private final List<LeaderElector> electors = new ArrayList<>();

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    config = KubernetesLeaseLockConfig.custom().namespace(CrudMockApiServer.NAMESPACE).build();
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  @AfterEach
  void closeElectors() {
    electors.forEach(LeaderElector::close);
  }

  /** Records what happened to one candidate; its work waits until interrupted. */
  private static final class Recorder implements Leadership {
    final AtomicReference<FencingToken> token = new AtomicReference<>();
    final CountDownLatch started = new CountDownLatch(1);
    final CountDownLatch stopped = new CountDownLatch(1);

    @Override
    public void onStartedLeading(HeldLock leadership) throws InterruptedException {
      token.set(leadership.lease().token());
      started.countDown();
      new CountDownLatch(1).await(); // the leader's work runs until leadership ends
    }

    @Override
    public void onStoppedLeading() {
      stopped.countDown();
    }
  }

  private LeaderElector candidate(String election, String identity, Recorder recorder) {
    LeaderElector elector =
        LeaderElector.start(
            KubernetesLeaseLockBackend.create(server.client(), config),
            ElectorConfig.custom(election)
                .identity(identity)
                .leaseDuration(LEASE_DURATION)
                .renewDeadline(Duration.ofSeconds(2))
                .retryPeriod(Duration.ofMillis(200))
                .haltOnLoss(false)
                .build(),
            recorder);
    electors.add(elector);
    return elector;
  }

  private static long leaders(List<LeaderElector> candidates) {
    return candidates.stream().filter(LeaderElector::isLeader).count();
  }

  private static int indexOfLeader(List<LeaderElector> candidates) {
    for (int i = 0; i < candidates.size(); i++) {
      if (candidates.get(i).isLeader()) {
        return i;
      }
    }
    throw new AssertionError("no leader");
  }

  @Test
  void exactlyOneOfThreeCandidatesLeadsAndTheLeaseNamesItWithItsToken() {
    List<Recorder> recorders = List.of(new Recorder(), new Recorder(), new Recorder());
    List<LeaderElector> candidates = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      candidates.add(candidate("billing-leader", "candidate-" + i, recorders.get(i)));
    }

    await().atMost(Duration.ofSeconds(10)).until(() -> leaders(candidates) == 1);
    int first = indexOfLeader(candidates);
    // Longer than the lease duration: the others would have taken over by now had the leader's
    // renewals not changed the Lease (and so restarted their observation).
    await()
        .during(LEASE_DURATION.plusSeconds(1))
        .atMost(LEASE_DURATION.plusSeconds(5))
        .until(() -> leaders(candidates) == 1 && candidates.get(first).isLeader());
    await().until(() -> recorders.get(first).token.get() != null);
    FencingToken firstToken = recorders.get(first).token.get();
    Lease lease = server.lease(config.leaseName("billing-leader"));

    // The Lease names the leader's grant: its identity plus the grant's nonce.
    assertThat(lease.getSpec().getHolderIdentity()).startsWith("candidate-" + first + "#");
    assertThat(lease.getSpec().getLeaseTransitions()).isEqualTo((int) firstToken.value());
    assertThat(lease.getSpec().getLeaseDurationSeconds()).isEqualTo(3);
    assertThat(recorders)
        .as("only the leader's work started")
        .filteredOn(r -> r.started.getCount() == 0)
        .containsExactly(recorders.get(first));

    candidates.get(first).close(); // steps down gracefully: releases the Lease

    await().atMost(Duration.ofSeconds(10)).until(() -> leaders(candidates) == 1);
    int second = indexOfLeader(candidates);
    assertThat(second).isNotEqualTo(first);
    await().until(() -> recorders.get(second).token.get() != null);
    assertThat(recorders.get(second).token.get().isNewerThan(firstToken)).isTrue();
    assertThat(server.lease(config.leaseName("billing-leader")).getSpec().getHolderIdentity())
        .startsWith("candidate-" + second + "#");
  }

  @Test
  void aLeaderWhoseLeaseWasTakenFromItStepsDownAtItsNextRenewal() throws Exception {
    Recorder recorder = new Recorder();
    LeaderElector leader = candidate("taken-leader", "candidate-a", recorder);
    recorder.started.await();
    Lease held = server.lease(config.leaseName("taken-leader"));

    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder(held)
                .editSpec()
                .withHolderIdentity("intruder")
                .withLeaseTransitions(held.getSpec().getLeaseTransitions() + 1)
                .endSpec()
                .build())
        .update();

    recorder.stopped.await();
    assertThat(leader.isLeader()).isFalse();
    assertThat(server.lease(config.leaseName("taken-leader")).getSpec().getHolderIdentity())
        .as("stepping down does not free someone else's Lease")
        .isEqualTo("intruder");
  }
}
