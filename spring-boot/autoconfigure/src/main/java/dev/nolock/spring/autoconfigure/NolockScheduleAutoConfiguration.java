package dev.nolock.spring.autoconfigure;

import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.MissedSchedules;
import dev.nolock.schedule.ScheduleConfig;
import dev.nolock.schedule.ScheduledSingleton;
import dev.nolock.spring.FencedScheduled;
import dev.nolock.spring.internal.PropertyCheck;
import dev.nolock.spring.internal.ScheduledJobs;
import dev.nolock.spring.internal.ScheduledRunsSection;
import io.micrometer.core.instrument.MeterRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.context.annotation.Bean;

/**
 * {@link FencedScheduled} methods, each run through a fenced {@link ScheduledSingleton}: each
 * scheduled time once across the fleet, the method's Spring data access committed only with the
 * finish of its attempt.
 *
 * <ol>
 *   <li>Active when {@code nolock-scheduled-singleton} is present and there is one {@code
 *       DataSource}; the runs go through its own connections, never a caller's transaction.
 *   <li>Each job's settings ({@code nolock.schedule.jobs.<name>.*}, {@code nolock.schedule.table})
 *       go through {@link ScheduleConfig.Builder}; a value it refuses fails start-up naming the
 *       property.
 *   <li>The singletons start once the context is refreshed and are closed when it stops, in
 *       nolock's lifecycle phase, before the {@code DataSource} closes.
 * </ol>
 */
@AutoConfiguration(after = {DataSourceAutoConfiguration.class, NolockAutoConfiguration.class})
@ConditionalOnClass(ScheduledSingleton.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({NolockProperties.class, NolockScheduleProperties.class})
public class NolockScheduleAutoConfiguration {

  /** The {@code @FencedScheduled} jobs. */
  @Bean
  @ConditionalOnMissingBean
  public ScheduledJobs nolockScheduledJobs(
      DataSource dataSource,
      NolockScheduleProperties properties,
      NolockProperties nolock,
      ScheduledRunsSection runs,
      ObjectProvider<MeterRegistry> registry) {
    MeterRegistry meters = registry.getIfUnique();
    return new ScheduledJobs(
        dataSource,
        (name, schedule) -> config(name, schedule, properties, meters, runs),
        properties.getJobs().keySet(),
        nolock.isCreateTables());
  }

  /** What each job's runs came to on this instance, for the {@code nolock} endpoint. */
  @Bean
  @ConditionalOnMissingBean
  public ScheduledRunsSection nolockScheduledRunsSection() {
    return new ScheduledRunsSection();
  }

  private static ScheduleConfig config(
      String name,
      CronSchedule schedule,
      NolockScheduleProperties p,
      MeterRegistry meters,
      ScheduledRunsSection runs) {
    ScheduleConfig.Builder b =
        ScheduleConfig.custom(name, schedule).onOutcome(outcome -> runs.record(name, outcome));
    if (p.getTable() != null) {
      PropertyCheck.named("nolock.schedule.table", () -> b.table(p.getTable()));
    }
    NolockScheduleProperties.Job job = p.getJobs().get(name);
    String prefix = "nolock.schedule.jobs." + name;
    if (job != null) {
      if (job.getLease() != null) {
        PropertyCheck.named(prefix + ".lease", () -> b.lease(job.getLease()));
      }
      if (job.getMaxAttempts() != null) {
        PropertyCheck.named(prefix + ".max-attempts", () -> b.maxAttempts(job.getMaxAttempts()));
      }
      if (job.getMissedSchedules() != null) {
        b.missedSchedules(
            switch (job.getMissedSchedules()) {
              case SKIP -> MissedSchedules.skip();
              case RUN_ONCE -> MissedSchedules.runOnce();
              case RUN_EACH -> MissedSchedules.runEach();
            });
      }
      if (job.getShutdownTimeout() != null) {
        PropertyCheck.named(
            prefix + ".shutdown-timeout", () -> b.shutdownTimeout(job.getShutdownTimeout()));
      }
      if (job.getQueryTimeout() != null) {
        PropertyCheck.named(prefix + ".query-timeout", () -> b.queryTimeout(job.getQueryTimeout()));
      }
    }
    if (meters != null) {
      b.metrics(meters, name);
    }
    return PropertyCheck.named(prefix, b::build);
  }
}
