package dev.nolock.spring.autoconfigure;

import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.internal.Elections;
import dev.nolock.spring.internal.ElectionsHealth;
import dev.nolock.spring.internal.NolockEndpoint;
import dev.nolock.spring.internal.NolockSection;
import dev.nolock.spring.internal.OwnersHealth;
import dev.nolock.spring.internal.QueueSettings;
import dev.nolock.spring.internal.QueueWorkers;
import dev.nolock.spring.internal.QueuesHealth;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * nolock in Actuator: health indicators for what can be unhealthy, and the {@code nolock} endpoint.
 *
 * <p>Guarantee: the endpoint shows names, tokens, counts, ages and states, never a payload, an
 * idempotency key or a stored response; like Actuator's other endpoints it is not exposed over HTTP
 * until {@code management.endpoints.web.exposure.include} lists {@code nolock}.
 *
 * <ol>
 *   <li>Runs after the patterns' auto-configurations, so it sees which of their beans exist; a
 *       pattern adds its part of the endpoint by declaring a {@link NolockSection} bean in its own
 *       auto-configuration (listed in {@code after} here).
 *   <li>With {@code spring-boot-health}: {@code nolockElections}, one indicator per declared
 *       election (DOWN when its elector is not running or its backend cannot be read), and {@code
 *       nolockQueues}, one per queue with a {@code @JobHandler} (DOWN when its pool is not running,
 *       the database cannot be read, or its oldest due job is older than {@code
 *       nolock.queue.queues.<name>.health.max-ready-age}), and {@code nolockOwners}, one per
 *       partition owner (DOWN when it is not running, e.g. stopped on its own: the failure's class,
 *       not its message, is in the details). {@code management.health.nolock.enabled=false} turns
 *       them off.
 *   <li>With Actuator's endpoint support: the {@code nolock} endpoint, when at least one {@link
 *       NolockSection} bean exists and the endpoint is available (enabled and exposed); it reports
 *       each section under its name.
 *   <li>Each bean backs off when the application declares its own of the same name or type.
 * </ol>
 */
@AutoConfiguration(
    after = {
      NolockLockAutoConfiguration.class,
      NolockLeaderAutoConfiguration.class,
      NolockQueueAutoConfiguration.class,
      NolockOwnershipAutoConfiguration.class,
      NolockScheduleAutoConfiguration.class,
      NolockIdempotencyAutoConfiguration.class
    })
public class NolockActuatorAutoConfiguration {

  /** The health indicators. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(HealthIndicator.class)
  @ConditionalOnEnabledHealthIndicator("nolock")
  static class Health {

    @Bean
    @ConditionalOnBean(Elections.class)
    @ConditionalOnMissingBean(name = "nolockElectionsHealthContributor")
    ElectionsHealth nolockElectionsHealthContributor(Elections elections) {
      return new ElectionsHealth(elections);
    }

    @Bean
    @ConditionalOnBean({QueueWorkers.class, QueueSettings.class})
    @ConditionalOnMissingBean(name = "nolockQueuesHealthContributor")
    QueuesHealth nolockQueuesHealthContributor(QueueWorkers workers, QueueSettings settings) {
      return new QueuesHealth(workers, settings);
    }

    @Bean
    @ConditionalOnBean(PartitionOwners.class)
    @ConditionalOnMissingBean(name = "nolockOwnersHealthContributor")
    OwnersHealth nolockOwnersHealthContributor(PartitionOwners owners) {
      return new OwnersHealth(owners);
    }
  }

  /** The {@code nolock} endpoint. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({Endpoint.class, ConditionalOnAvailableEndpoint.class})
  static class Report {

    @Bean
    @ConditionalOnBean(NolockSection.class)
    @ConditionalOnMissingBean
    @ConditionalOnAvailableEndpoint
    NolockEndpoint nolockEndpoint(ObjectProvider<NolockSection> sections) {
      return new NolockEndpoint(sections.orderedStream().toList());
    }
  }
}
