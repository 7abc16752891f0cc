package dev.nolock.schedule.internal;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;

class ScheduleMetricsTest {

  /**
   * Two instances of one job in one registry stay apart by their instance name ({@code name}), as
   * in every nolock component; the schedule's own meters keep their names and also carry the job.
   */
  @Test
  void twoInstancesInOneRegistryStayApartByTheirInstanceName() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ScheduleMetrics a = new ScheduleMetrics(registry, "reports-a", "nightly-report");
    ScheduleMetrics b = new ScheduleMetrics(registry, "reports-b", "nightly-report");

    a.finished();
    a.skipped();
    b.finished();
    b.finished();

    assertThat(
            registry
                .get("nolock.schedule.finished")
                .tags("component", "schedule", "name", "reports-a", "job", "nightly-report")
                .counter()
                .count())
        .isEqualTo(1);
    assertThat(
            registry
                .get("nolock.schedule.finished")
                .tags("component", "schedule", "name", "reports-b", "job", "nightly-report")
                .counter()
                .count())
        .isEqualTo(2);
    assertThat(
            registry
                .get("nolock.conflicts")
                .tags("component", "schedule", "name", "reports-a")
                .counter()
                .count())
        .isEqualTo(1);
    assertThat(
            registry
                .get("nolock.conflicts")
                .tags("component", "schedule", "name", "reports-b")
                .counter()
                .count())
        .isZero();
  }
}
