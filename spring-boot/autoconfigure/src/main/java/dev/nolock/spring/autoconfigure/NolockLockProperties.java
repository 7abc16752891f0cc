package dev.nolock.spring.autoconfigure;

import dev.nolock.lock.LockPurpose;
import java.time.Duration;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** The fenced lock, under {@code nolock.lock.*}; see {@link NolockLockAutoConfiguration}. */
@ConfigurationProperties("nolock.lock")
public class NolockLockProperties {

  /** Where the lock keeps its leases. Nothing is configured without it. */
  private Backend backend;

  /**
   * Why the application locks, required: {@code correctness} when two holders at once would corrupt
   * data (every protected write must then go through a fence with the lease's token), or {@code
   * efficiency} when duplicate work is only wasted effort (the lease is then refused).
   */
  private LockPurpose purpose;

  /**
   * This process's holder identity, for the lease table and logs (a nonce is added per grant).
   * Default: the process id plus a random UUID.
   */
  private String owner;

  /** Whether a watchdog renews held leases. */
  private boolean autoRenew = true;

  /** How often the watchdog renews, at most half of each lease's TTL. Default: TTL/3. */
  private Duration renewalInterval;

  /** The least time kept back at each point-of-no-return check. Default: 100 ms. */
  private Duration safetyMargin;

  /**
   * The assumed bound on the clock-rate drift between holder and server, in parts per million.
   * Default: 500.
   */
  private Long clockDriftPpm;

  /** The first backoff between acquire attempts (full jitter, doubling). Default: 10 ms. */
  private Duration backoffBase;

  /** The longest backoff between acquire attempts. Default: 500 ms. */
  private Duration backoffMax;

  /**
   * How long the first waiter lets newer callers take a freed lock ahead of it, on a backend that
   * queues waiters (PostgreSQL); zero serves strictly in arrival order. Default: 20 ms.
   */
  private Duration patience;

  /** The {@code name} tag of the lock's metrics (never a lock name). */
  private String metricsName = "default";

  private final Postgres postgres = new Postgres();

  private final Redis redis = new Redis();

  /** The lock's backends. */
  public enum Backend {
    /** Lease rows in PostgreSQL, over the application's {@code DataSource}. */
    POSTGRES,
    /** Lease keys in the application's Redis, on a connection of the lock's own. */
    REDIS
  }

  /** The PostgreSQL backend, under {@code nolock.lock.postgres.*}. */
  public static class Postgres {

    /** The lease table, optionally {@code schema.table}. Default: {@code nolock_locks}. */
    private String table;

    /** How long a lock statement may run (whole seconds). Default: 5 s. */
    private Duration queryTimeout;

    /**
     * Whether waiting acquires are woken by LISTEN/NOTIFY when a lease is freed; off behind
     * PgBouncer in transaction pooling. Default: true.
     */
    private Boolean listen;

    public Boolean getListen() {
      return listen;
    }

    public void setListen(Boolean listen) {
      this.listen = listen;
    }

    public String getTable() {
      return table;
    }

    public void setTable(String table) {
      this.table = table;
    }

    public Duration getQueryTimeout() {
      return queryTimeout;
    }

    public void setQueryTimeout(Duration queryTimeout) {
      this.queryTimeout = queryTimeout;
    }
  }

  /** The Redis backend, under {@code nolock.lock.redis.*}. */
  public static class Redis {

    /** The prefix of the lease and counter keys. Default: {@code nolock:lock:}. */
    private String keyPrefix;

    public String getKeyPrefix() {
      return keyPrefix;
    }

    public void setKeyPrefix(String keyPrefix) {
      this.keyPrefix = keyPrefix;
    }
  }

  public Backend getBackend() {
    return backend;
  }

  public void setBackend(Backend backend) {
    this.backend = backend;
  }

  public LockPurpose getPurpose() {
    return purpose;
  }

  public void setPurpose(LockPurpose purpose) {
    this.purpose = purpose;
  }

  public String getOwner() {
    return owner;
  }

  public void setOwner(String owner) {
    this.owner = owner;
  }

  public boolean isAutoRenew() {
    return autoRenew;
  }

  public void setAutoRenew(boolean autoRenew) {
    this.autoRenew = autoRenew;
  }

  public Duration getRenewalInterval() {
    return renewalInterval;
  }

  public void setRenewalInterval(Duration renewalInterval) {
    this.renewalInterval = renewalInterval;
  }

  public Duration getSafetyMargin() {
    return safetyMargin;
  }

  public void setSafetyMargin(Duration safetyMargin) {
    this.safetyMargin = safetyMargin;
  }

  public Long getClockDriftPpm() {
    return clockDriftPpm;
  }

  public void setClockDriftPpm(Long clockDriftPpm) {
    this.clockDriftPpm = clockDriftPpm;
  }

  public Duration getBackoffBase() {
    return backoffBase;
  }

  public void setBackoffBase(Duration backoffBase) {
    this.backoffBase = backoffBase;
  }

  public Duration getPatience() {
    return patience;
  }

  public void setPatience(Duration patience) {
    this.patience = patience;
  }

  public Duration getBackoffMax() {
    return backoffMax;
  }

  public void setBackoffMax(Duration backoffMax) {
    this.backoffMax = backoffMax;
  }

  public String getMetricsName() {
    return metricsName;
  }

  public void setMetricsName(String metricsName) {
    this.metricsName = metricsName;
  }

  public Postgres getPostgres() {
    return postgres;
  }

  public Redis getRedis() {
    return redis;
  }
}
