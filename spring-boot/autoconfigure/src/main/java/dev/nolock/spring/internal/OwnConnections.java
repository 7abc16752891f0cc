package dev.nolock.spring.internal;

import javax.sql.DataSource;
import org.springframework.jdbc.datasource.TransactionAwareDataSourceProxy;

/**
 * The {@code DataSource} nolock's own transactions use: the application's, with any {@link
 * TransactionAwareDataSourceProxy} taken off. Through such a proxy, a connection asked for inside a
 * {@code @Transactional} method is the caller's, so a lock grant, a claim or an idempotency phase
 * would commit or roll back with the caller's transaction instead of on its own.
 */
public final class OwnConnections {

  private OwnConnections() {}

  /** {@code dataSource} without the transaction-aware proxies around it. */
  public static DataSource of(DataSource dataSource) {
    DataSource current = dataSource;
    while (current instanceof TransactionAwareDataSourceProxy proxy) {
      current = proxy.getTargetDataSource();
    }
    return current;
  }
}
