package dev.nolock.spring.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** Leader elections, under {@code nolock.leader.*}; see {@link NolockLeaderAutoConfiguration}. */
@ConfigurationProperties("nolock.leader")
public class NolockLeaderProperties {

  /** The elections this instance runs for, by name (the name of the election's lease). */
  private final Map<String, Election> elections = new LinkedHashMap<>();

  public Map<String, Election> getElections() {
    return elections;
  }

  /** One election, under {@code nolock.leader.elections.<name>.*}. */
  public static class Election {

    /** How long a term's lease lasts without renewal (1 s to 10 min). Default: 15 s. */
    private Duration leaseDuration;

    /**
     * How long the leader keeps failing to renew before it steps down; below lease-duration.
     * Default: 10 s.
     */
    private Duration renewDeadline;

    /**
     * How often candidates try and the leader renews; renew-deadline must exceed 1.2 times it.
     * Default: 2 s.
     */
    private Duration retryPeriod;

    /**
     * How long stepping down waits for the leader's work to end before the lease is released anyway
     * (0 to 10 min). Default: 10 s.
     */
    private Duration workStopTimeout;

    /**
     * Whether losing the lease (not stepping down) halts the process, so that a leader's work that
     * ignores interrupts cannot overlap its successor's.
     */
    private boolean haltOnLoss = true;

    public Duration getLeaseDuration() {
      return leaseDuration;
    }

    public void setLeaseDuration(Duration leaseDuration) {
      this.leaseDuration = leaseDuration;
    }

    public Duration getRenewDeadline() {
      return renewDeadline;
    }

    public void setRenewDeadline(Duration renewDeadline) {
      this.renewDeadline = renewDeadline;
    }

    public Duration getRetryPeriod() {
      return retryPeriod;
    }

    public void setRetryPeriod(Duration retryPeriod) {
      this.retryPeriod = retryPeriod;
    }

    public Duration getWorkStopTimeout() {
      return workStopTimeout;
    }

    public void setWorkStopTimeout(Duration workStopTimeout) {
      this.workStopTimeout = workStopTimeout;
    }

    public boolean isHaltOnLoss() {
      return haltOnLoss;
    }

    public void setHaltOnLoss(boolean haltOnLoss) {
      this.haltOnLoss = haltOnLoss;
    }
  }
}
