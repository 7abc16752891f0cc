package dev.nolock.spring.autoconfigure;

import dev.nolock.queue.QueueConfig;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * The skip-locked queues, under {@code nolock.queue.*}. Every value is checked at start-up by the
 * library's builders ({@code QueueConfig}, {@code WorkerConfig}); a value they refuse fails
 * start-up with the property's name. A value left out is the library's default.
 */
@ConfigurationProperties("nolock.queue")
public class NolockQueueProperties {

  /** The jobs table of every queue, optionally schema-qualified. */
  private String table = QueueConfig.DEFAULT_TABLE;

  /** Settings per queue name. */
  private Map<String, Queue> queues = new LinkedHashMap<>();

  public String getTable() {
    return table;
  }

  public void setTable(String table) {
    this.table = table;
  }

  public Map<String, Queue> getQueues() {
    return queues;
  }

  public void setQueues(Map<String, Queue> queues) {
    this.queues = queues;
  }

  /** One queue's settings, {@code nolock.queue.queues.<name>.*}. */
  public static class Queue {

    /** How long a claim holds a job before the reaper may take it back (1 s to 1 day). */
    private Duration lease;

    /** Attempts per job in all, including the first (1 to 1000). */
    private Integer maxAttempts;

    /** The backoff ceiling after the first failure (0 to 1 h); it doubles per failure. */
    private Duration backoffBase;

    /** The largest backoff ceiling (backoff-base to 1 h). */
    private Duration backoffMax;

    /** How long one queue statement may run (whole seconds, 1 s to 5 min). */
    private Duration queryTimeout;

    /** Whether enqueue sends a NOTIFY that wakes listening workers. */
    private Boolean notifyOnEnqueue;

    /** Handler threads of the queue's worker pool (1 to 256). */
    private Integer concurrency;

    /** Most jobs per claim (1 to 1000); default the concurrency. */
    private Integer batchSize;

    /** Claim statements, and completion statements, the worker pool keeps in flight (1 to 16). */
    private Integer claimsInFlight;

    /** How long an idle worker pool waits before it claims again (10 ms to 10 min). */
    private Duration pollInterval;

    /** Whether the worker pool LISTENs for enqueues; without it the pool only polls. */
    private Boolean listen;

    /** How often held jobs' leases are extended (100 ms to 1 h); default a third of the lease. */
    private Duration heartbeatInterval;

    /** How often the worker pool takes back expired leases (100 ms to 1 h). */
    private Duration reapInterval;

    /** How often the worker pool vacuums the jobs table (1 s to 24 h); default never. */
    private Duration vacuumInterval;

    /** How long stopping lets running handlers finish before handing their jobs back (0 to 1 h). */
    private Duration shutdownTimeout;

    /** How the queue's health indicator judges it. */
    private final Health health = new Health();

    public Health getHealth() {
      return health;
    }

    public Duration getLease() {
      return lease;
    }

    public void setLease(Duration lease) {
      this.lease = lease;
    }

    public Integer getMaxAttempts() {
      return maxAttempts;
    }

    public void setMaxAttempts(Integer maxAttempts) {
      this.maxAttempts = maxAttempts;
    }

    public Duration getBackoffBase() {
      return backoffBase;
    }

    public void setBackoffBase(Duration backoffBase) {
      this.backoffBase = backoffBase;
    }

    public Duration getBackoffMax() {
      return backoffMax;
    }

    public void setBackoffMax(Duration backoffMax) {
      this.backoffMax = backoffMax;
    }

    public Duration getQueryTimeout() {
      return queryTimeout;
    }

    public void setQueryTimeout(Duration queryTimeout) {
      this.queryTimeout = queryTimeout;
    }

    public Boolean getNotifyOnEnqueue() {
      return notifyOnEnqueue;
    }

    public void setNotifyOnEnqueue(Boolean notifyOnEnqueue) {
      this.notifyOnEnqueue = notifyOnEnqueue;
    }

    public Integer getConcurrency() {
      return concurrency;
    }

    public void setConcurrency(Integer concurrency) {
      this.concurrency = concurrency;
    }

    public Integer getBatchSize() {
      return batchSize;
    }

    public void setBatchSize(Integer batchSize) {
      this.batchSize = batchSize;
    }

    public Integer getClaimsInFlight() {
      return claimsInFlight;
    }

    public void setClaimsInFlight(Integer claimsInFlight) {
      this.claimsInFlight = claimsInFlight;
    }

    public Duration getPollInterval() {
      return pollInterval;
    }

    public void setPollInterval(Duration pollInterval) {
      this.pollInterval = pollInterval;
    }

    public Boolean getListen() {
      return listen;
    }

    public void setListen(Boolean listen) {
      this.listen = listen;
    }

    public Duration getHeartbeatInterval() {
      return heartbeatInterval;
    }

    public void setHeartbeatInterval(Duration heartbeatInterval) {
      this.heartbeatInterval = heartbeatInterval;
    }

    public Duration getReapInterval() {
      return reapInterval;
    }

    public void setReapInterval(Duration reapInterval) {
      this.reapInterval = reapInterval;
    }

    public Duration getVacuumInterval() {
      return vacuumInterval;
    }

    public void setVacuumInterval(Duration vacuumInterval) {
      this.vacuumInterval = vacuumInterval;
    }

    public Duration getShutdownTimeout() {
      return shutdownTimeout;
    }

    public void setShutdownTimeout(Duration shutdownTimeout) {
      this.shutdownTimeout = shutdownTimeout;
    }
  }

  /** What the queue's health indicator checks. */
  public static class Health {

    /**
     * The queue is DOWN while its oldest due job has been due longer than this: the workers do not
     * keep up, or do not claim. Default: not checked.
     */
    private Duration maxReadyAge;

    public Duration getMaxReadyAge() {
      return maxReadyAge;
    }

    public void setMaxReadyAge(Duration maxReadyAge) {
      this.maxReadyAge = maxReadyAge;
    }
  }
}
