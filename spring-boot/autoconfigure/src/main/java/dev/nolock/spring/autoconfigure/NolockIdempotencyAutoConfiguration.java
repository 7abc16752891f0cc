package dev.nolock.spring.autoconfigure;

import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.spring.Idempotent;
import dev.nolock.spring.internal.IdempotentBodies;
import dev.nolock.spring.internal.IdempotentMethods;
import dev.nolock.spring.internal.IdempotentRequests;
import dev.nolock.spring.internal.OwnConnections;
import dev.nolock.spring.internal.PropertyCheck;
import io.micrometer.core.instrument.MeterRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;
import org.springframework.web.servlet.DispatcherServlet;
import tools.jackson.databind.json.JsonMapper;

/**
 * Idempotency keys in a Spring application: an {@link IdempotencyKeys} bean storing HTTP replies,
 * and, in a servlet web application, {@link Idempotent} on controller methods.
 *
 * <ol>
 *   <li>Active when {@code nolock-idempotency-http} is present and there is one {@code DataSource};
 *       the keys work on its own connections, never in a caller's transaction.
 *   <li>{@code nolock.idempotency.*} goes through {@link IdempotencyConfig.Builder}; a value it
 *       refuses fails start-up naming the property.
 *   <li>With Spring MVC, every {@code @Idempotent} method is checked at start-up and runs through
 *       the keys (see {@link Idempotent}).
 * </ol>
 */
@AutoConfiguration(
    after = {DataSourceAutoConfiguration.class, NolockAutoConfiguration.class},
    afterName = "org.springframework.boot.jackson.autoconfigure.JacksonAutoConfiguration")
@ConditionalOnClass({IdempotencyKeys.class, IdempotentHttpHandler.class})
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({NolockProperties.class, NolockIdempotencyProperties.class})
public class NolockIdempotencyAutoConfiguration {

  /** The keys, storing replies; on the {@code DataSource}'s own connections. */
  @Bean
  @ConditionalOnMissingBean(IdempotencyKeys.class)
  public IdempotencyKeys<Reply> nolockIdempotencyKeys(
      DataSource dataSource,
      NolockIdempotencyProperties p,
      NolockProperties nolock,
      ObjectProvider<MeterRegistry> registry) {
    String prefix = "nolock.idempotency";
    IdempotencyConfig.Builder b = IdempotencyConfig.custom();
    if (p.getTable() != null) {
      PropertyCheck.named(prefix + ".table", () -> b.table(p.getTable()));
    }
    if (p.getLease() != null) {
      PropertyCheck.named(prefix + ".lease", () -> b.lease(p.getLease()));
    }
    if (p.getRetention() != null) {
      PropertyCheck.named(prefix + ".retention", () -> b.retention(p.getRetention()));
    }
    if (p.getQueryTimeout() != null) {
      PropertyCheck.named(prefix + ".query-timeout", () -> b.queryTimeout(p.getQueryTimeout()));
    }
    MeterRegistry meters = registry.getIfUnique();
    if (meters != null) {
      b.metrics(meters, "http");
    }
    IdempotencyKeys<Reply> keys =
        IdempotencyKeys.create(
            OwnConnections.of(dataSource),
            PropertyCheck.named(prefix, b::build),
            IdempotentHttpHandler.replyCodec());
    if (nolock.isCreateTables()) {
      keys.createTableIfMissing();
    }
    return keys;
  }

  /** {@code @Idempotent} on Spring MVC controller methods. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  @ConditionalOnClass(DispatcherServlet.class)
  static class Mvc {

    /**
     * Static and lazy in what it needs: a post-processor is created before other beans, so it looks
     * the keys up at the first request instead of forcing them (and the DataSource) early.
     */
    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static IdempotentMethods nolockIdempotentMethods(
        ObjectProvider<IdempotencyKeys<Reply>> keys,
        ObjectProvider<DataSource> dataSource,
        ObjectProvider<JsonMapper> json,
        Environment environment) {
      return new IdempotentMethods(
          new IdempotentRequests(keys, dataSource, json, maxBodyBytes(environment)), keys);
    }

    @Bean
    IdempotentBodies nolockIdempotentBodies(NolockIdempotencyProperties properties) {
      return new IdempotentBodies(properties.getMaxBodyBytes());
    }

    private static int maxBodyBytes(Environment environment) {
      int max =
          environment.getProperty("nolock.idempotency.max-body-bytes", Integer.class, 1024 * 1024);
      if (max < 1) {
        throw new IllegalStateException(
            "nolock.idempotency.max-body-bytes: must be at least 1, got " + max);
      }
      return max;
    }
  }
}
