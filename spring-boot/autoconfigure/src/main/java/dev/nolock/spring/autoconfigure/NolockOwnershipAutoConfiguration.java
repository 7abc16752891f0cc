package dev.nolock.spring.autoconfigure;

import dev.nolock.ownership.OwnershipConfig;
import dev.nolock.ownership.PartitionOwner;
import dev.nolock.spring.PartitionHandler;
import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.internal.OwnersSection;
import dev.nolock.spring.internal.Ownerships;
import dev.nolock.spring.internal.PropertyCheck;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.core.env.Environment;

/**
 * Partition owners declared under {@code nolock.ownership.owners.<name>.*}, each applying its
 * topic's records through one {@link PartitionHandler} method, and the {@link PartitionOwners}
 * bean.
 *
 * <p>Guarantee: per partition, each record's change (the handler's Spring data access included)
 * commits at most once, in offset order, and never under an owner epoch that has moved on; see
 * {@link PartitionOwner}.
 *
 * <ol>
 *   <li>Active when {@code nolock-partitioned-ownership} is present and there is one {@code
 *       DataSource}.
 *   <li>Each owner's settings go through {@link OwnershipConfig.Builder}; a value it refuses fails
 *       start-up naming the property. The bootstrap servers default to {@code
 *       spring.kafka.bootstrap-servers} (a list or a comma-separated string), the consumer group to
 *       {@code <spring.application.name>.<owner>}; with neither set, start-up fails naming both.
 *   <li>The owners start once the context is refreshed and are closed when it stops, in nolock's
 *       lifecycle phase (before the {@code DataSource} closes): closing waits for the running
 *       apply, then leaves the group.
 * </ol>
 */
@AutoConfiguration(after = {DataSourceAutoConfiguration.class, NolockAutoConfiguration.class})
@ConditionalOnClass(PartitionOwner.class)
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({NolockProperties.class, NolockOwnershipProperties.class})
public class NolockOwnershipAutoConfiguration {

  /** The declared owners, run with their @PartitionHandler methods. */
  @Bean
  @ConditionalOnMissingBean(PartitionOwners.class)
  public Ownerships nolockPartitionOwners(
      DataSource dataSource,
      NolockOwnershipProperties properties,
      NolockProperties nolock,
      Environment environment,
      ObjectProvider<MeterRegistry> registry) {
    MeterRegistry meters = registry.getIfUnique();
    Map<String, OwnershipConfig> configs = new LinkedHashMap<>();
    properties
        .getOwners()
        .forEach(
            (name, owner) ->
                configs.put(
                    name,
                    config(
                        name,
                        owner,
                        Binder.get(environment)
                            .bind("spring.kafka.bootstrap-servers", Bindable.listOf(String.class))
                            .map(servers -> String.join(",", servers))
                            .orElse(null),
                        environment.getProperty("spring.application.name"),
                        meters)));
    return new Ownerships(dataSource, configs, nolock.isCreateTables());
  }

  /** The owners' part of the {@code nolock} Actuator endpoint (no Actuator class needed). */
  @Bean
  @ConditionalOnBean(PartitionOwners.class)
  @ConditionalOnMissingBean(OwnersSection.class)
  public OwnersSection nolockOwnersSection(PartitionOwners owners) {
    return new OwnersSection(owners);
  }

  private static OwnershipConfig config(
      String name,
      NolockOwnershipProperties.Owner o,
      String springBootstrap,
      String application,
      MeterRegistry meters) {
    String prefix = "nolock.ownership.owners." + name;
    String bootstrap = o.getBootstrapServers() != null ? o.getBootstrapServers() : springBootstrap;
    if (bootstrap == null) {
      throw new IllegalStateException(
          prefix
              + ".bootstrap-servers: not set, and neither is spring.kafka.bootstrap-servers: set"
              + " one of them to the Kafka cluster's host:port list.");
    }
    if (o.getTopic() == null) {
      throw new IllegalStateException(prefix + ".topic: required, the topic whose records apply.");
    }
    // The application's name in the default group: two services that both name an owner
    // "payments" would otherwise share one consumer group and each apply half the records.
    if (o.getGroupId() == null && (application == null || application.isBlank())) {
      throw new IllegalStateException(
          prefix
              + ".group-id: not set, and neither is spring.application.name, from which the"
              + " default <application>."
              + name
              + " is made: set one of them (every instance of one service must use the same).");
    }
    String group = o.getGroupId() != null ? o.getGroupId() : application + "." + name;
    OwnershipConfig.Builder b =
        PropertyCheck.named(
            prefix + ".bootstrap-servers/topic/group-id",
            () -> OwnershipConfig.custom(bootstrap, o.getTopic(), group));
    if (o.getTable() != null) {
      PropertyCheck.named(prefix + ".table", () -> b.table(o.getTable()));
    }
    if (o.getPollTimeout() != null) {
      PropertyCheck.named(prefix + ".poll-timeout", () -> b.pollTimeout(o.getPollTimeout()));
    }
    if (o.getMaxPollRecords() != null) {
      PropertyCheck.named(
          prefix + ".max-poll-records", () -> b.maxPollRecords(o.getMaxPollRecords()));
    }
    if (o.getSessionTimeout() != null) {
      PropertyCheck.named(
          prefix + ".session-timeout", () -> b.sessionTimeout(o.getSessionTimeout()));
    }
    if (o.getMaxPollInterval() != null) {
      PropertyCheck.named(
          prefix + ".max-poll-interval", () -> b.maxPollInterval(o.getMaxPollInterval()));
    }
    if (o.getSafetyMargin() != null) {
      PropertyCheck.named(prefix + ".safety-margin", () -> b.safetyMargin(o.getSafetyMargin()));
    }
    if (o.getCommitInterval() != null) {
      PropertyCheck.named(
          prefix + ".commit-interval", () -> b.commitInterval(o.getCommitInterval()));
    }
    if (o.getQueryTimeout() != null) {
      PropertyCheck.named(prefix + ".query-timeout", () -> b.queryTimeout(o.getQueryTimeout()));
    }
    if (o.getCloseTimeout() != null) {
      PropertyCheck.named(prefix + ".close-timeout", () -> b.closeTimeout(o.getCloseTimeout()));
    }
    if (o.getDeadLetterTopic() != null) {
      PropertyCheck.named(
          prefix + ".dead-letter-topic", () -> b.deadLetterTopic(o.getDeadLetterTopic()));
    }
    if (meters != null) {
      b.metrics(meters, name);
    }
    return PropertyCheck.named(prefix, b::build);
  }
}
