package dev.nolock.spring.autoconfigure;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.LeaderElector;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.LeadershipListener;
import dev.nolock.spring.internal.Elections;
import dev.nolock.spring.internal.ElectionsSection;
import dev.nolock.spring.internal.PropertyCheck;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * Leader elections declared under {@code nolock.leader.elections.<name>.*}, over the {@link
 * LockBackend} bean, and the {@link Leaders} bean.
 *
 * <p>Guarantee: while this instance leads an election, its term's lease is held in the backend, and
 * the term's fencing token reaches every {@link LeadershipListener} of that election and every
 * {@link Leaders#runIfLeader} call; a term is released only after its listeners were told it ended
 * and its running work ended (or {@code work-stop-timeout} passed).
 *
 * <ol>
 *   <li>Active when {@code nolock-fenced-lock} is present and there is a {@link LockBackend} bean
 *       ({@code nolock.lock.backend}, or the application's own).
 *   <li>Each election's settings go through {@link ElectorConfig.Builder}; a value it refuses fails
 *       start-up naming the property.
 *   <li>A {@link LeadershipListener} bean for an election that is not declared fails start-up,
 *       naming the bean and its {@code election()} method.
 *   <li>The electors start once the context is refreshed and are closed when it stops (a {@code
 *       SmartLifecycle} in nolock's phase: after the web server stopped taking requests, before the
 *       Redis client and the {@code DataSource} close); closing steps down and releases the lease.
 * </ol>
 */
@AutoConfiguration(
    after = NolockLockAutoConfiguration.class,
    afterName =
        "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration")
@ConditionalOnClass(LeaderElector.class)
@ConditionalOnBean(LockBackend.class)
@EnableConfigurationProperties(NolockLeaderProperties.class)
public class NolockLeaderAutoConfiguration {

  /** The declared elections, and what runs only on their leader. */
  @Bean
  @ConditionalOnMissingBean(Leaders.class)
  public Elections nolockLeaders(
      LockBackend backend,
      NolockLeaderProperties properties,
      ObjectProvider<MeterRegistry> registry,
      ListableBeanFactory beans) {
    MeterRegistry meters = registry.getIfUnique();
    Map<String, ElectorConfig> configs = new LinkedHashMap<>();
    properties
        .getElections()
        .forEach((name, election) -> configs.put(name, config(name, election, meters)));
    return new Elections(backend, configs, beans);
  }

  /** The elections' part of the {@code nolock} Actuator endpoint (no Actuator class needed). */
  @Bean
  @ConditionalOnBean(Elections.class)
  @ConditionalOnMissingBean(ElectionsSection.class)
  public ElectionsSection nolockElectionsSection(Elections elections) {
    return new ElectionsSection(elections);
  }

  private static ElectorConfig config(
      String name, NolockLeaderProperties.Election e, MeterRegistry meters) {
    String prefix = "nolock.leader.elections." + name;
    ElectorConfig.Builder b =
        PropertyCheck.named(prefix, () -> ElectorConfig.custom(name).haltOnLoss(e.isHaltOnLoss()));
    if (e.getLeaseDuration() != null) {
      PropertyCheck.named(prefix + ".lease-duration", () -> b.leaseDuration(e.getLeaseDuration()));
    }
    if (e.getRenewDeadline() != null) {
      PropertyCheck.named(prefix + ".renew-deadline", () -> b.renewDeadline(e.getRenewDeadline()));
    }
    if (e.getRetryPeriod() != null) {
      PropertyCheck.named(prefix + ".retry-period", () -> b.retryPeriod(e.getRetryPeriod()));
    }
    if (e.getWorkStopTimeout() != null) {
      PropertyCheck.named(
          prefix + ".work-stop-timeout", () -> b.workStopTimeout(e.getWorkStopTimeout()));
    }
    if (meters != null) {
      b.metrics(meters, name);
    }
    return PropertyCheck.named(prefix + ".lease-duration/renew-deadline/retry-period", b::build);
  }
}
