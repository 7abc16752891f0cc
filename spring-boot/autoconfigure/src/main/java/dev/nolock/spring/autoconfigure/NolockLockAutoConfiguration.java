package dev.nolock.spring.autoconfigure;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.lock.postgres.PostgresLockConfig;
import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.lock.redis.RedisLockBackendConfig;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.internal.LockShutdown;
import dev.nolock.spring.internal.LocksSection;
import dev.nolock.spring.internal.OwnConnections;
import dev.nolock.spring.internal.PropertyCheck;
import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.micrometer.core.instrument.MeterRegistry;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.util.ClassUtils;

/**
 * The application's {@link FencedLock}, over the backend {@code nolock.lock.backend} names.
 *
 * <p>Guarantee: the lock's own statements (acquire, renew, release) never join the caller's
 * transaction, and the lock is only built for the purpose the application states.
 *
 * <ol>
 *   <li>Active only when {@code nolock.lock.backend} is set ({@code postgres} or {@code redis}) and
 *       {@code nolock-fenced-lock} is on the classpath: the backend is chosen by property, never
 *       guessed from what happens to be there.
 *   <li>The {@link LockBackend} bean, unless the application defines one: {@code postgres} builds
 *       {@link PostgresLockBackend} on {@link OwnConnections#of} the one {@code DataSource}, so a
 *       grant commits on its own even when the application's {@code DataSource} is a {@code
 *       TransactionAwareDataSourceProxy} and the call comes from a {@code @Transactional} method;
 *       {@code redis} builds {@link RedisLockBackend} on a connection of its own from the
 *       application's Lettuce {@link RedisClient} bean or, without one, from the native client of
 *       Spring Data Redis's {@code LettuceConnectionFactory} (never the factory's shared
 *       connection, which other code may put in {@code MULTI} or switch to another database; the
 *       connection has the client's command timeout, {@code spring.data.redis.timeout}). A missing
 *       artifact, {@code DataSource} or Redis client fails start-up naming the property.
 *   <li>{@code nolock.lock.purpose} must be set: a missing purpose fails start-up, explaining the
 *       two. Every other {@code nolock.lock.*} setting goes through {@link LockConfig.Builder}; a
 *       value it refuses fails start-up naming the property.
 *   <li>Metrics go to the application's {@link MeterRegistry} when it has one.
 *   <li>The lock is closed, releasing what it holds, when the context stops ({@link LockShutdown}),
 *       before the Redis client and the {@code DataSource} close.
 * </ol>
 */
@AutoConfiguration(
    afterName = {
      "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
      "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration",
      "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration"
    })
@ConditionalOnClass(FencedLock.class)
@ConditionalOnProperty(prefix = "nolock.lock", name = "backend")
@EnableConfigurationProperties({NolockLockProperties.class, NolockProperties.class})
public class NolockLockAutoConfiguration {

  private static final String BACKEND = "nolock.lock.backend";

  /** The lock, over the {@link LockBackend} bean, with the {@code nolock.lock.*} settings. */
  @Bean
  @ConditionalOnMissingBean
  public FencedLock nolockFencedLock(
      ObjectProvider<LockBackend> backend,
      NolockLockProperties properties,
      ObjectProvider<MeterRegistry> registry) {
    LockBackend lockBackend = backend.getIfUnique();
    if (lockBackend == null) {
      throw new IllegalStateException(missingBackend(properties.getBackend()));
    }
    return FencedLock.create(lockBackend, lockConfig(properties, registry.getIfUnique()));
  }

  /** Releases what the lock holds when the context stops, before the connections close. */
  @Bean
  @ConditionalOnMissingBean
  public LockShutdown nolockLockShutdown(FencedLock lock) {
    return new LockShutdown(lock);
  }

  /** The held locks' part of the {@code nolock} Actuator endpoint (no Actuator class needed). */
  @Bean
  @ConditionalOnBean(FencedLock.class)
  @ConditionalOnMissingBean(LocksSection.class)
  public LocksSection nolockLocksSection(ObjectProvider<FencedLock> locks) {
    return new LocksSection(locks.orderedStream().toList());
  }

  static LockConfig lockConfig(NolockLockProperties p, MeterRegistry registry) {
    if (p.getPurpose() == null) {
      throw new IllegalStateException(
          "nolock.lock.purpose is not set. Say why the application locks: 'correctness' when two"
              + " holders at once would corrupt data or double-charge (no TTL lock prevents that"
              + " alone: send every protected write through a Fence with held.lease(), whose"
              + " token the resource checks), or 'efficiency' when duplicate work is merely wasted"
              + " (held.lease() is then refused, so the lock cannot be taken for protection).");
    }
    LockConfig.Builder b = LockConfig.custom(p.getPurpose()).autoRenew(p.isAutoRenew());
    if (p.getOwner() != null) {
      PropertyCheck.named("nolock.lock.owner", () -> b.owner(p.getOwner()));
    }
    if (p.getRenewalInterval() != null) {
      PropertyCheck.named(
          "nolock.lock.renewal-interval", () -> b.renewalInterval(p.getRenewalInterval()));
    }
    if (p.getSafetyMargin() != null) {
      PropertyCheck.named("nolock.lock.safety-margin", () -> b.safetyMargin(p.getSafetyMargin()));
    }
    if (p.getClockDriftPpm() != null) {
      PropertyCheck.named(
          "nolock.lock.clock-drift-ppm", () -> b.clockDriftPpm(p.getClockDriftPpm()));
    }
    if (p.getBackoffBase() != null || p.getBackoffMax() != null) {
      var base = p.getBackoffBase() != null ? p.getBackoffBase() : LockConfig.DEFAULT_BACKOFF_BASE;
      var max = p.getBackoffMax() != null ? p.getBackoffMax() : LockConfig.DEFAULT_BACKOFF_MAX;
      PropertyCheck.named("nolock.lock.backoff-base/backoff-max", () -> b.backoff(base, max));
    }
    if (p.getPatience() != null) {
      PropertyCheck.named("nolock.lock.patience", () -> b.patience(p.getPatience()));
    }
    if (registry != null) {
      PropertyCheck.named(
          "nolock.lock.metrics-name", () -> b.metrics(registry, p.getMetricsName()));
    }
    return PropertyCheck.named("nolock.lock.backoff-base/backoff-max", b::build);
  }

  private static String missingBackend(NolockLockProperties.Backend backend) {
    return switch (backend) {
      case POSTGRES ->
          ClassUtils.isPresent("dev.nolock.lock.postgres.PostgresLockBackend", null)
              ? BACKEND
                  + "=postgres needs exactly one DataSource bean (spring.datasource.url), or a"
                  + " LockBackend bean of your own."
              : BACKEND
                  + "=postgres needs dev.nolock:nolock-fenced-lock-postgres on the classpath: add"
                  + " it, or choose another backend.";
      case REDIS ->
          ClassUtils.isPresent("dev.nolock.lock.redis.RedisLockBackend", null)
                  && ClassUtils.isPresent("io.lettuce.core.RedisClient", null)
              ? BACKEND
                  + "=redis needs a Lettuce RedisClient bean, or Spring Data Redis's"
                  + " LettuceConnectionFactory on a standalone Redis (spring.data.redis.url), or a"
                  + " LockBackend bean of your own."
              : BACKEND
                  + "=redis needs dev.nolock:nolock-fenced-lock-redis (with Lettuce) on the"
                  + " classpath: add it, or choose another backend.";
    };
  }

  /** The PostgreSQL backend, on connections of its own. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass(PostgresLockBackend.class)
  @ConditionalOnProperty(name = BACKEND, havingValue = "postgres")
  static class PostgresBackendConfiguration {

    @Bean
    @ConditionalOnMissingBean(LockBackend.class)
    PostgresLockBackend nolockLockBackend(
        ObjectProvider<DataSource> dataSource,
        NolockLockProperties properties,
        NolockProperties common) {
      DataSource pool = dataSource.getIfUnique();
      if (pool == null) {
        throw new IllegalStateException(missingBackend(NolockLockProperties.Backend.POSTGRES));
      }
      NolockLockProperties.Postgres p = properties.getPostgres();
      PostgresLockConfig.Builder b = PostgresLockConfig.custom();
      if (p.getTable() != null) {
        PropertyCheck.named("nolock.lock.postgres.table", () -> b.table(p.getTable()));
      }
      if (p.getQueryTimeout() != null) {
        PropertyCheck.named(
            "nolock.lock.postgres.query-timeout", () -> b.queryTimeout(p.getQueryTimeout()));
      }
      if (p.getListen() != null) {
        b.listen(p.getListen());
      }
      PostgresLockBackend backend = PostgresLockBackend.create(OwnConnections.of(pool), b.build());
      if (common.isCreateTables()) {
        backend.createTableIfMissing();
      }
      return backend;
    }
  }

  /** The Redis backend, on a connection of its own. */
  @Configuration(proxyBeanMethods = false)
  @ConditionalOnClass({RedisLockBackend.class, RedisClient.class})
  @ConditionalOnProperty(name = BACKEND, havingValue = "redis")
  static class RedisBackendConfiguration {

    private static final String LETTUCE_FACTORY =
        "org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory";

    @Bean
    @ConditionalOnMissingBean(LockBackend.class)
    RedisLockBackend nolockLockBackend(
        ConfigurableListableBeanFactory beans, NolockLockProperties properties) {
      RedisClient client = beans.getBeanProvider(RedisClient.class).getIfUnique();
      if (client == null && ClassUtils.isPresent(LETTUCE_FACTORY, beans.getBeanClassLoader())) {
        client = SpringDataRedis.nativeClient(beans);
      }
      if (client == null) {
        throw new IllegalStateException(missingBackend(NolockLockProperties.Backend.REDIS));
      }
      String prefix = properties.getRedis().getKeyPrefix();
      RedisLockBackendConfig.Builder b = RedisLockBackendConfig.custom();
      if (prefix != null) {
        PropertyCheck.named("nolock.lock.redis.key-prefix", () -> b.keyPrefix(prefix));
      }
      RedisClient chosen = client;
      return PropertyCheck.named(
          "spring.data.redis.timeout", () -> RedisLockBackend.connect(chosen, b.build()));
    }
  }

  /** Spring Data Redis, referred to only when it is on the classpath. */
  private static final class SpringDataRedis {

    static RedisClient nativeClient(ConfigurableListableBeanFactory beans) {
      var factory =
          beans
              .getBeanProvider(
                  org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory.class)
              .getIfUnique();
      if (factory == null) {
        return null;
      }
      AbstractRedisClient client = factory.getRequiredNativeClient();
      if (!(client instanceof RedisClient redisClient)) {
        throw new IllegalStateException(
            BACKEND
                + "=redis works on one Redis server (a standalone or a sentinel-managed primary),"
                + " not on a Redis Cluster ("
                + client.getClass().getSimpleName()
                + "): every lock key of a name must live in one slot of one server.");
      }
      return redisClient;
    }
  }
}
