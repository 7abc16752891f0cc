package dev.nolock.spring.actuator;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * With several registries (e.g. Prometheus and OTLP), nolock's meters reach every one through
 * Boot's composite registry; without that composite they reach none.
 */
class MeterRegistriesTest {

  private final SimpleMeterRegistry prometheus = new SimpleMeterRegistry();
  private final SimpleMeterRegistry otlp = new SimpleMeterRegistry();

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(
              AutoConfigurations.of(
                  NolockLockAutoConfiguration.class, NolockLeaderAutoConfiguration.class))
          .withBean(LockBackend.class, InMemoryLockBackend::new)
          .withBean("prometheusRegistry", MeterRegistry.class, () -> prometheus)
          .withBean("otlpRegistry", MeterRegistry.class, () -> otlp)
          .withPropertyValues("nolock.leader.elections.billing.halt-on-loss=false");

  @Test
  void throughBootsCompositeTheMetersReachEveryRegistry() {
    runner
        .withConfiguration(
            AutoConfigurations.of(
                MetricsAutoConfiguration.class, CompositeMeterRegistryAutoConfiguration.class))
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(
                      prometheus.find("nolock.leadership.changes").tag("name", "billing").meter())
                  .isNotNull();
              assertThat(otlp.find("nolock.leadership.changes").tag("name", "billing").meter())
                  .isNotNull();
            });
  }

  /** Negative control: two registries and no composite, no unique registry, so no meters. */
  @Test
  void withoutTheCompositeTwoRegistriesGetNoMeters() {
    runner.run(
        context -> {
          assertThat(context).hasNotFailed();
          assertThat(prometheus.find("nolock.leadership.changes").meter()).isNull();
          assertThat(otlp.find("nolock.leadership.changes").meter()).isNull();
        });
  }
}
