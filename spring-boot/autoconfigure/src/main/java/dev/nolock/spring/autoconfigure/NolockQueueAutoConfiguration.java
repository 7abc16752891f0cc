package dev.nolock.spring.autoconfigure;

import dev.nolock.queue.JobQueue;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.internal.JacksonJson;
import dev.nolock.spring.internal.OwnConnections;
import dev.nolock.spring.internal.PayloadCodecs;
import dev.nolock.spring.internal.QueueSettings;
import dev.nolock.spring.internal.QueueWorkers;
import dev.nolock.spring.internal.QueuesSection;
import io.micrometer.core.instrument.MeterRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import tools.jackson.databind.json.JsonMapper;

/**
 * The skip-locked queue in a Spring application: {@link JobQueues}, from which the application gets
 * its queues, and one worker pool per queue that has a {@link dev.nolock.spring.JobHandler},
 * started after the refresh and closed on shutdown. Active with {@code nolock-skip-locked-queue}
 * and one {@code DataSource}; every queue works on that {@code DataSource}'s own connections, never
 * in the caller's transaction. Settings come from {@link NolockQueueProperties}, checked at
 * start-up.
 */
@AutoConfiguration(
    after = {DataSourceAutoConfiguration.class, NolockAutoConfiguration.class},
    afterName = {
      "org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration",
      "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration"
    })
@ConditionalOnClass(JobQueue.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({NolockProperties.class, NolockQueueProperties.class})
public class NolockQueueAutoConfiguration {

  /**
   * {@code nolock.queue.*}, checked by the library's builders; each queue's meters go to the
   * application's {@code MeterRegistry} (Boot's composite when it has several), tagged with the
   * queue's name.
   */
  @Bean
  @ConditionalOnMissingBean
  public QueueSettings nolockQueueSettings(
      NolockQueueProperties properties, ObjectProvider<MeterRegistry> registry) {
    return new QueueSettings(properties, registry.getIfUnique());
  }

  /** The queues, on the {@code DataSource}'s own connections. */
  @Bean
  @ConditionalOnMissingBean
  public JobQueues jobQueues(
      DataSource dataSource,
      QueueSettings settings,
      NolockProperties nolock,
      ObjectProvider<PayloadCodecs.Json> json) {
    return new JobQueues(
        OwnConnections.of(dataSource),
        settings::queueConfig,
        new PayloadCodecs(json.getIfUnique()),
        nolock.isCreateTables());
  }

  /**
   * The worker pools of the {@code @JobHandler}s. It depends on the {@code DataSource}, so it is
   * destroyed before the {@code DataSource} closes.
   */
  @Bean
  @ConditionalOnMissingBean
  public QueueWorkers nolockQueueWorkers(
      JobQueues jobQueues, QueueSettings settings, DataSource dataSource) {
    return new QueueWorkers(jobQueues, settings::workerConfig);
  }

  /** The queues' part of the {@code nolock} Actuator endpoint (no Actuator class needed). */
  @Bean
  @ConditionalOnBean(QueueWorkers.class)
  @ConditionalOnMissingBean(QueuesSection.class)
  public QueuesSection nolockQueuesSection(QueueWorkers workers) {
    return new QueuesSection(workers);
  }

  /** JSON payloads through the application's Jackson 3 mapper, when it has one. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(JsonMapper.class)
  static class JacksonCodecs {

    @Bean
    @ConditionalOnSingleCandidate(JsonMapper.class)
    PayloadCodecs.Json nolockQueueJson(JsonMapper mapper) {
      return new JacksonJson(mapper);
    }
  }
}
