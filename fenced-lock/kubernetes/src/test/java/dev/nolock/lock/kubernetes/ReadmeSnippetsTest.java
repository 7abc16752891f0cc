package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.ReadmeSnippet;
import io.fabric8.kubernetes.client.KubernetesClient;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.LinkedBlockingQueue;
import org.junit.jupiter.api.Test;

/**
 * The README's usage snippet, run against the mock API server in CRUD mode. Only the client, the
 * namespace and the halt differ; {@code invoices} stands for the application's fenced write.
 */
class ReadmeSnippetsTest {

  private static final Path README = Path.of("README.md");

  /** Stands for the application's resource; a real one sends the write through a fence. */
  static final class Invoices {
    final List<String> charged = new CopyOnWriteArrayList<>();

    void charge(Lease lease, String invoice) {
      charged.add(invoice + "@" + lease.token().value());
    }
  }

  @Test
  void theReadmeSnippetElectsALeaderThatChargesThroughItsTerm() {
    try (CrudMockApiServer server = CrudMockApiServer.start()) {
      KubernetesClient client = server.client();
      String namespace = CrudMockApiServer.NAMESPACE;
      Invoices invoices = new Invoices();
      BlockingQueue<String> dueInvoices = new LinkedBlockingQueue<>(List.of("invoice-42"));

      // --- README: Usage ---
      KubernetesLeaseLockBackend backend =
          KubernetesLeaseLockBackend.create(
              client, KubernetesLeaseLockConfig.custom().namespace(namespace).build());
      LeaderElector elector =
          LeaderElector.start(
              backend,
              ElectorConfig.custom("billing-leader") // Lease "nolock-billing-leader"
                  .haltOnLoss(false) // README: leave the default (true) in production
                  .build(),
              new Leadership() {
                @Override
                public void onStartedLeading(HeldLock term) throws InterruptedException {
                  while (true) {
                    String invoice = dueInvoices.take(); // interrupted when leadership ends
                    term.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                    invoices.charge(term.lease(), invoice); // fenced on term.lease().token()
                  }
                }

                @Override
                public void onStoppedLeading() {
                  // stop the leader's work; the elector halts the process after this by default
                }
              });
      Runtime.getRuntime().addShutdownHook(new Thread(elector::close));
      // --- end of snippet ---

      try {
        await().until(() -> invoices.charged.size() == 1);
        assertThat(invoices.charged).containsExactly("invoice-42@1");
        assertThat(elector.isLeader()).isTrue();
      } finally {
        elector.close();
      }
      assertThat(server.lease("nolock-billing-leader").getSpec().getHolderIdentity())
          .as("close() released the Lease")
          .isNull();
    }
  }

  /**
   * The README shows the code the test above runs, against the mock API server and with halting
   * off.
   */
  @Test
  void theReadmeShowsTheCodeTheTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "KubernetesClient client = new KubernetesClientBuilder().build(); // in a pod: its"
                + " service account String namespace = System.getenv(\"POD_NAMESPACE\");           "
                + "    // from the downward API // yours: BlockingQueue<String> dueInvoices (the"
                + " leader's work), invoices (the fenced resource)")
        .replacing(
            ".build(),                          // 15 s / 10 s / 2 s, identity = pid + UUID",
            ".haltOnLoss(false) // README: leave the default (true) in production .build(),")
        .assertRunBy(ReadmeSnippetsTest.class, "Usage");
  }
}
