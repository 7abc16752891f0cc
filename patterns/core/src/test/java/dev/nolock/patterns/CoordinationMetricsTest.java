package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class CoordinationMetricsTest {

  @Test
  void everySignalIsRecordedUnderTheInstanceTags() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CoordinationMetrics metrics = CoordinationMetrics.of(registry, "lock", "payments");

    metrics.acquired(Duration.ofMillis(40));
    metrics.acquired(Duration.ofMillis(60));
    metrics.gaveUp(Duration.ofSeconds(2));
    metrics.held(Duration.ofMillis(500));
    metrics.conflict();
    metrics.conflict();
    metrics.conflict();
    metrics.renewed();
    metrics.renewalFailed();
    metrics.leaseLost();
    metrics.fenceRejected();

    var search =
        registry.find("nolock.acquire.wait").tag("component", "lock").tag("name", "payments");
    assertThat(search.tag("outcome", "acquired").timer().count()).isEqualTo(2);
    assertThat(search.tag("outcome", "acquired").timer().totalTime(TimeUnit.MILLISECONDS))
        .isEqualTo(100.0);
    assertThat(registry.find("nolock.acquire.wait").tag("outcome", "gave_up").timer().count())
        .isEqualTo(1);
    assertThat(registry.get("nolock.lease.held").timer().totalTime(TimeUnit.MILLISECONDS))
        .isEqualTo(500.0);
    assertThat(registry.get("nolock.conflicts").counter().count()).isEqualTo(3);
    assertThat(registry.get("nolock.renewals").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.renewal.failures").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.lease.losses").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.fence.rejections").counter().count()).isEqualTo(1);
  }

  @Test
  void twoInstancesOnOneRegistryKeepSeparateCounts() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CoordinationMetrics.of(registry, "lock", "a").conflict();
    CoordinationMetrics.of(registry, "lock", "b").conflict();
    CoordinationMetrics.of(registry, "lock", "b").conflict();

    assertThat(registry.get("nolock.conflicts").tag("name", "a").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.conflicts").tag("name", "b").counter().count()).isEqualTo(2);
  }

  @Test
  void prometheusScrapeShowsThePrometheusNamesWithZerosBeforeAnyEvent() {
    PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
    CoordinationMetrics metrics = CoordinationMetrics.of(registry, "queue", "emails");
    metrics.fenceRejected();
    metrics.acquired(Duration.ofMillis(5));

    String scrape = registry.scrape();

    assertThat(scrape)
        .contains("nolock_fence_rejections_total{component=\"queue\",name=\"emails\"} 1.0")
        .contains("nolock_lease_losses_total{component=\"queue\",name=\"emails\"} 0.0")
        .contains("nolock_conflicts_total{component=\"queue\",name=\"emails\"} 0.0")
        .contains("nolock_renewal_failures_total{")
        .contains(
            "nolock_acquire_wait_seconds_count{component=\"queue\",name=\"emails\",outcome=\"acquired\"}"
                + " 1")
        .contains("nolock_lease_held_seconds_count{");
  }

  @Test
  void badComponentOrInstanceNamesAreRefused() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    assertThatThrownBy(() -> CoordinationMetrics.of(registry, "Lock!", "a"))
        .hasMessageContaining("must match");
    assertThatThrownBy(() -> CoordinationMetrics.of(registry, "lock", ""))
        .hasMessageContaining("metrics instance name is blank");
    assertThatThrownBy(() -> CoordinationMetrics.of(registry, "lock", "k".repeat(101)))
        .hasMessageContaining("more than 100");
  }

  @Test
  void noopRecordsNothingAndDoesNotFail() {
    CoordinationMetrics metrics = CoordinationMetrics.noop();
    metrics.conflict();
    metrics.acquired(Duration.ofMillis(1));
    assertThat(metrics).isNotNull();
  }
}
