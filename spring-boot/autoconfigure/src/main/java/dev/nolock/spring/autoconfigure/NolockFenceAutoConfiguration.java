package dev.nolock.spring.autoconfigure;

import dev.nolock.patterns.sql.Fence;
import dev.nolock.spring.NolockTransactions;
import dev.nolock.spring.internal.OwnConnections;
import dev.nolock.spring.internal.PropertyCheck;
import io.micrometer.core.instrument.MeterRegistry;
import javax.sql.DataSource;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;

/**
 * The application's SQL {@link Fence} on PostgreSQL, for the writes of a {@code CORRECTNESS} lock
 * holder or a leader.
 *
 * <p>Guarantee: {@code fence.write(nolockTransactions.current(), held.lease(), writes)} advances
 * the fence row and runs the writes in the caller's Spring transaction, so they commit or roll back
 * together with the caller's own writes; a stale lease's write is refused as a value ({@code
 * Either.left(FenceRejection)}) with nothing written.
 *
 * <ol>
 *   <li>Active when {@code nolock-patterns-sql} is on the classpath and the application has one
 *       {@code DataSource}; backs off when the application defines its own {@link Fence}.
 *   <li>The table is {@code nolock.fence.table} (default {@code nolock_fences}); a name the fence
 *       refuses fails start-up naming the property. With {@code nolock.create-tables=true} the
 *       tables are created at start-up, on a connection of nolock's own.
 *   <li>Rejections are counted in the application's {@code MeterRegistry} when it has one.
 * </ol>
 *
 * The fence holds no connection: the caller chooses the transaction with each {@code write} ({@link
 * NolockTransactions#current()} for the caller's, a {@code DSLContext} over the {@code DataSource}
 * for one of its own).
 */
@AutoConfiguration(
    after = NolockAutoConfiguration.class,
    afterName = {
      "org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration",
      "org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration"
    })
@ConditionalOnClass({Fence.class, DataSource.class})
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties({NolockFenceProperties.class, NolockProperties.class})
public class NolockFenceAutoConfiguration {

  /** The fence on {@code nolock.fence.table}. */
  @Bean
  @ConditionalOnMissingBean
  public Fence nolockFence(
      DataSource dataSource,
      NolockFenceProperties properties,
      NolockProperties common,
      ObjectProvider<MeterRegistry> registry) {
    MeterRegistry meters = registry.getIfUnique();
    Fence fence =
        PropertyCheck.named(
            "nolock.fence.table",
            () ->
                meters == null
                    ? Fence.onTable(properties.getTable())
                    : Fence.onTable(properties.getTable(), meters, properties.getMetricsName()));
    if (common.isCreateTables()) {
      fence.createTableIfMissing(DSL.using(OwnConnections.of(dataSource), SQLDialect.POSTGRES));
    }
    return fence;
  }
}
