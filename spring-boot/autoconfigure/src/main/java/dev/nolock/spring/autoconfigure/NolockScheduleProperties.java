package dev.nolock.spring.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Fenced scheduled jobs, under {@code nolock.schedule.*}; see {@link
 * NolockScheduleAutoConfiguration}.
 */
@ConfigurationProperties("nolock.schedule")
public class NolockScheduleProperties {

  /** The runs table every job uses. Default: nolock_scheduled_runs. */
  private String table;

  /** Settings per @FencedScheduled job, by its name; each must name a job that exists. */
  private final Map<String, Job> jobs = new LinkedHashMap<>();

  public String getTable() {
    return table;
  }

  public void setTable(String table) {
    this.table = table;
  }

  public Map<String, Job> getJobs() {
    return jobs;
  }

  /** What the scheduler does with scheduled times nobody ran (the fleet was down). */
  public enum Missed {
    /** Run only the latest due time; the earlier ones are recorded as missed. */
    SKIP,
    /** Run once for all of them. */
    RUN_ONCE,
    /** Run each of them, up to a bound. */
    RUN_EACH
  }

  /** One job, under {@code nolock.schedule.jobs.<name>.*}. */
  public static class Job {

    /**
     * How long a run is held without renewal before another instance takes it over. Default: 30 s.
     */
    private Duration lease;

    /** Attempts per scheduled time, the first included (1 to 100). Default: 3. */
    private Integer maxAttempts;

    /** Scheduled times nobody ran: skip, run-once or run-each. Default: skip. */
    private Missed missedSchedules;

    /** How long shutdown waits for a running job before it is interrupted. Default: 30 s. */
    private Duration shutdownTimeout;

    /** Each statement's timeout. Default: 5 s. */
    private Duration queryTimeout;

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

    public Missed getMissedSchedules() {
      return missedSchedules;
    }

    public void setMissedSchedules(Missed missedSchedules) {
      this.missedSchedules = missedSchedules;
    }

    public Duration getShutdownTimeout() {
      return shutdownTimeout;
    }

    public void setShutdownTimeout(Duration shutdownTimeout) {
      this.shutdownTimeout = shutdownTimeout;
    }

    public Duration getQueryTimeout() {
      return queryTimeout;
    }

    public void setQueryTimeout(Duration queryTimeout) {
      this.queryTimeout = queryTimeout;
    }
  }
}
