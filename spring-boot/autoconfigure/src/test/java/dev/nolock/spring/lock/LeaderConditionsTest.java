package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.HeldLock;
import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.LeadershipListener;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** When the elections appear, and how bad declarations fail start-up. */
class LeaderConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  NolockLockAutoConfiguration.class, NolockLeaderAutoConfiguration.class))
          .withPropertyValues("nolock.leader.elections.billing.halt-on-loss=false");

  @Test
  void withoutALockBackendThereAreNoElections() {
    runner.run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(Leaders.class));
  }

  @Test
  void aListenerOfAnUndeclaredElectionFailsStartUpNamingTheBean() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withBean("invoicing", LeadershipListener.class, () -> new Listener("invoices"))
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining("Bean 'invoicing'")
                  .hasStackTraceContaining("election()")
                  .hasStackTraceContaining("'invoices', which is not declared")
                  .hasStackTraceContaining("nolock.leader.elections.invoices");
            });
  }

  @Test
  void aNegativeLeaseFailsStartUpNamingTheProperty() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withPropertyValues("nolock.leader.elections.billing.lease-duration=-5s")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining(
                      "nolock.leader.elections.billing.lease-duration: leaseDuration must be"
                          + " between");
            });
  }

  @Test
  void aRenewDeadlineNotBelowTheLeaseFailsStartUpNamingTheElection() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withPropertyValues(
            "nolock.leader.elections.billing.lease-duration=5s",
            "nolock.leader.elections.billing.renew-deadline=5s")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.leader.elections.billing.")
                    .hasStackTraceContaining("must be greater than renewDeadline"));
  }

  @Test
  void anUndeclaredElectionIsRefusedAtTheCall() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .run(
            context ->
                assertThatThrownBy(
                        () -> context.getBean(Leaders.class).runIfLeader("nope", term -> 1))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("nolock.leader.elections.nope"));
  }

  /**
   * A term whose leader-only work is still running is not released when the context closes: the
   * listeners hear the end first, the lease stays until the work returns.
   */
  @Test
  void closingWaitsForLeaderOnlyWorkBeforeReleasingTheLease() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    CountDownLatch working = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    AtomicBoolean stopped = new AtomicBoolean();
    runner
        .withBean(LockBackend.class, () -> backend)
        .withBean(
            "billingListener",
            LeadershipListener.class,
            () ->
                new LeadershipListener() {
                  @Override
                  public String election() {
                    return "billing";
                  }

                  @Override
                  public void startedLeading(HeldLock term) {}

                  @Override
                  public void stoppedLeading(FencingToken token) {
                    stopped.set(true);
                  }
                })
        .withPropertyValues(
            "nolock.leader.elections.billing.lease-duration=10s",
            "nolock.leader.elections.billing.renew-deadline=5s",
            "nolock.leader.elections.billing.retry-period=100ms",
            "nolock.leader.elections.billing.work-stop-timeout=1m")
        .run(
            context -> {
              Leaders leaders = context.getBean(Leaders.class);
              await().atMost(Duration.ofSeconds(10)).until(() -> leaders.isLeader("billing"));
              Thread worker =
                  new Thread(
                      () ->
                          leaders.runIfLeader(
                              "billing",
                              term -> {
                                working.countDown();
                                try {
                                  finish.await();
                                } catch (InterruptedException e) {
                                  Thread.currentThread().interrupt();
                                }
                                return null;
                              }));
              worker.start();
              working.await();
              Thread closer = new Thread(context::close);
              closer.start();
              await().atMost(Duration.ofSeconds(10)).untilTrue(stopped);
              assertThat(leaders.runIfLeader("billing", term -> 1))
                  .as("no new work once the term ends")
                  .isEmpty();
              assertThat(closer.isAlive()).isTrue();
              assertThat(backend.holder("billing").isDefined())
                  .as("the lease is kept while the work runs")
                  .isTrue();
              finish.countDown();
              closer.join();
              worker.join();
              assertThat(backend.holder("billing").isDefined()).isFalse();
            });
  }

  private record Listener(String election) implements LeadershipListener {
    @Override
    public void startedLeading(HeldLock term) {}

    @Override
    public void stoppedLeading(FencingToken token) {}
  }
}
