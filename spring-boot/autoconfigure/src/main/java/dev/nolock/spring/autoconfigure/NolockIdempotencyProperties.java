package dev.nolock.spring.autoconfigure;

import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Idempotency keys, under {@code nolock.idempotency.*}; see {@link
 * NolockIdempotencyAutoConfiguration}.
 */
@ConfigurationProperties("nolock.idempotency")
public class NolockIdempotencyProperties {

  /** The keys table. Default: nolock_idempotency_keys. */
  private String table;

  /** How long an attempt holds its key before a retry may take it over. Default: 30 s. */
  private Duration lease;

  /** How long a completed key is kept and replayed, counted from completion. Default: 24 h. */
  private Duration retention;

  /** Each statement's timeout. Default: 5 s. */
  private Duration queryTimeout;

  /** The largest request body an @Idempotent method accepts (413 above). Default: 1 MiB. */
  private int maxBodyBytes = 1024 * 1024;

  public String getTable() {
    return table;
  }

  public void setTable(String table) {
    this.table = table;
  }

  public Duration getLease() {
    return lease;
  }

  public void setLease(Duration lease) {
    this.lease = lease;
  }

  public Duration getRetention() {
    return retention;
  }

  public void setRetention(Duration retention) {
    this.retention = retention;
  }

  public Duration getQueryTimeout() {
    return queryTimeout;
  }

  public void setQueryTimeout(Duration queryTimeout) {
    this.queryTimeout = queryTimeout;
  }

  public int getMaxBodyBytes() {
    return maxBodyBytes;
  }

  public void setMaxBodyBytes(int maxBodyBytes) {
    this.maxBodyBytes = maxBodyBytes;
  }
}
