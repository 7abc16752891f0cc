package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.HeldLock;
import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.LeadershipListener;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
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

  private record Listener(String election) implements LeadershipListener {
    @Override
    public void startedLeading(HeldLock term) {}

    @Override
    public void stoppedLeading(FencingToken token) {}
  }
}
