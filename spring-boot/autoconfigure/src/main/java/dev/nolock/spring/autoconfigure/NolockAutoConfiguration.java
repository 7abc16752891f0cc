package dev.nolock.spring.autoconfigure;

import dev.nolock.spring.NolockTransactions;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.context.annotation.Bean;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * What every PostgreSQL pattern of nolock shares in a Spring application: {@link
 * NolockTransactions}, the caller's transaction for the caller's-transaction paths. Active when the
 * application has one {@code DataSource}, jOOQ (which every PostgreSQL pattern brings) and Spring's
 * transaction support.
 */
@AutoConfiguration(after = DataSourceAutoConfiguration.class)
@ConditionalOnClass({DSLContext.class, DataSource.class, TransactionSynchronizationManager.class})
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(NolockProperties.class)
public class NolockAutoConfiguration {

  /** The caller's transaction, over the application's {@code DataSource}. */
  @Bean
  @ConditionalOnMissingBean
  public NolockTransactions nolockTransactions(DataSource dataSource) {
    return new NolockTransactions(dataSource);
  }
}
