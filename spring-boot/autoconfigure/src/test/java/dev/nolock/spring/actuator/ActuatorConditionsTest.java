package dev.nolock.spring.actuator;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.ownership.PartitionOwner;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.autoconfigure.NolockActuatorAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.spring.internal.Elections;
import dev.nolock.spring.internal.ElectionsHealth;
import dev.nolock.spring.internal.ElectionsSection;
import dev.nolock.spring.internal.NolockEndpoint;
import dev.nolock.spring.internal.OwnersHealth;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** When nolock's health indicators and endpoint appear, and what the election indicator says. */
class ActuatorConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  NolockLockAutoConfiguration.class,
                  NolockLeaderAutoConfiguration.class,
                  NolockActuatorAutoConfiguration.class))
          .withPropertyValues(
              "nolock.leader.elections.billing.halt-on-loss=false",
              "management.endpoints.web.exposure.include=nolock");

  @Test
  void withAnElectionThereAreItsIndicatorItsSectionAndTheEndpoint() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .run(
            context ->
                assertThat(context)
                    .hasNotFailed()
                    .hasBean("nolockElectionsHealthContributor")
                    .hasSingleBean(ElectionsSection.class)
                    .hasSingleBean(NolockEndpoint.class));
  }

  @Test
  void withoutAPatternBeanThereIsNeitherIndicatorNorEndpoint() {
    runner.run(
        context ->
            assertThat(context)
                .hasNotFailed()
                .doesNotHaveBean(Elections.class)
                .doesNotHaveBean(ElectionsHealth.class)
                .doesNotHaveBean(OwnersHealth.class)
                .doesNotHaveBean(NolockEndpoint.class));
  }

  @Test
  void withoutSpringBootHealthThereIsNoIndicatorButStillTheEndpoint() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withClassLoader(new FilteredClassLoader(HealthIndicator.class))
        .run(
            context ->
                assertThat(context)
                    .hasNotFailed()
                    .doesNotHaveBean(ElectionsHealth.class)
                    .hasSingleBean(NolockEndpoint.class));
  }

  @Test
  void withoutActuatorEndpointsThereIsNoEndpointButStillTheIndicator() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withClassLoader(new FilteredClassLoader(Endpoint.class))
        .run(
            context ->
                assertThat(context)
                    .hasNotFailed()
                    .hasSingleBean(ElectionsHealth.class)
                    .doesNotHaveBean(NolockEndpoint.class));
  }

  @Test
  void theEndpointIsNotCreatedWhenItIsNotExposed() {
    new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                NolockLockAutoConfiguration.class,
                NolockLeaderAutoConfiguration.class,
                NolockActuatorAutoConfiguration.class))
        .withPropertyValues("nolock.leader.elections.billing.halt-on-loss=false")
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .run(
            context ->
                assertThat(context)
                    .hasNotFailed()
                    .hasSingleBean(ElectionsSection.class)
                    .doesNotHaveBean(NolockEndpoint.class));
  }

  @Test
  void theHealthIndicatorsCanBeTurnedOff() {
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withPropertyValues("management.health.nolock.enabled=false")
        .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(ElectionsHealth.class));
  }

  /**
   * With the application's own {@link PartitionOwners}, whose one owner is not running, there is
   * the owners' indicator and it says DOWN.
   */
  @Test
  void withPartitionOwnersThereIsTheirIndicatorAndAnOwnerNotRunningIsDown() {
    PartitionOwners owners =
        new PartitionOwners() {
          @Override
          public Set<String> names() {
            return Set.of("deposits");
          }

          @Override
          public PartitionOwner<?, ?> owner(String name) {
            throw new IllegalArgumentException("No running partition owner \"" + name + "\"");
          }
        };
    runner
        .withBean(PartitionOwners.class, () -> owners)
        .run(
            context -> {
              assertThat(context).hasNotFailed().hasSingleBean(OwnersHealth.class);
              Health health =
                  ((HealthIndicator) context.getBean(OwnersHealth.class).getContributor("deposits"))
                      .health(true);
              assertThat(health.getStatus()).isEqualTo(Status.DOWN);
              assertThat(health.getDetails()).containsEntry("running", false);
            });
  }

  @Test
  void theApplicationsOwnBeansWin() {
    HealthIndicator own = () -> Health.up().build();
    NolockEndpoint ownEndpoint = new NolockEndpoint(List.of());
    runner
        .withBean(LockBackend.class, InMemoryLockBackend::new)
        .withBean("nolockElectionsHealthContributor", HealthIndicator.class, () -> own)
        .withBean(NolockEndpoint.class, () -> ownEndpoint)
        .run(
            context -> {
              assertThat(context).hasNotFailed().doesNotHaveBean(ElectionsHealth.class);
              assertThat(context.getBean("nolockElectionsHealthContributor")).isSameAs(own);
              assertThat(context.getBean(NolockEndpoint.class)).isSameAs(ownEndpoint);
            });
  }

  /**
   * An election is DOWN while its backend cannot be read, and while its elector is closed; the same
   * context is UP before either (the control that the indicator can say UP at all).
   */
  @Test
  void anElectionIsDownWhenItsBackendFailsOrItsElectorStopped() {
    AtomicBoolean unreachable = new AtomicBoolean();
    LockBackend backend = new Unreachable(new InMemoryLockBackend(), unreachable);
    runner
        .withBean(LockBackend.class, () -> backend)
        .run(
            context -> {
              HealthIndicator billing =
                  (HealthIndicator)
                      context.getBean(ElectionsHealth.class).getContributor("billing");
              await().atMost(Duration.ofSeconds(10)).until(() -> isLeader(context));
              Health up = billing.health();
              assertThat(up.getStatus()).isEqualTo(Status.UP);
              assertThat(up.getDetails()).containsEntry("leader", true);

              unreachable.set(true);
              Health down = billing.health();
              assertThat(down.getStatus()).isEqualTo(Status.DOWN);
              assertThat(down.getDetails().get("backendError").toString())
                  .contains("backend unreachable");

              unreachable.set(false);
              assertThat(billing.health().getStatus()).isEqualTo(Status.UP);
              context.getBean(Elections.class).stop();
              Health stopped = billing.health();
              assertThat(stopped.getStatus()).isEqualTo(Status.DOWN);
              assertThat(stopped.getDetails()).containsEntry("running", false);
            });
  }

  private static boolean isLeader(org.springframework.context.ApplicationContext context) {
    return context.getBean(Elections.class).isLeader("billing");
  }

  /** A working backend whose reads fail while {@code down} is set, as a lost database would. */
  private record Unreachable(LockBackend delegate, AtomicBoolean down) implements LockBackend {

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      return delegate.tryAcquire(name, owner, ttl);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      return delegate.renew(name, owner, token, ttl);
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return delegate.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      if (down.get()) {
        throw new IllegalStateException("backend unreachable");
      }
      return delegate.holder(name);
    }
  }
}
