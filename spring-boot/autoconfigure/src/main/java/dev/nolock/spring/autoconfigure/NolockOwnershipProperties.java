package dev.nolock.spring.autoconfigure;

import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/**
 * Partition owners, under {@code nolock.ownership.*}; see {@link NolockOwnershipAutoConfiguration}.
 */
@ConfigurationProperties("nolock.ownership")
public class NolockOwnershipProperties {

  /** The owners this instance runs, by name: each needs one @PartitionHandler method. */
  private final Map<String, Owner> owners = new LinkedHashMap<>();

  public Map<String, Owner> getOwners() {
    return owners;
  }

  /** One owner, under {@code nolock.ownership.owners.<name>.*}. */
  public static class Owner {

    /** The topic whose partitions are owned and applied. Required. */
    private String topic;

    /**
     * The consumer group; every instance of one service uses the same, and no other service.
     * Default: spring.application.name, a dot and the owner's name.
     */
    private String groupId;

    /** Kafka's bootstrap servers. Default: spring.kafka.bootstrap-servers. */
    private String bootstrapServers;

    /** The ownership table. Default: nolock_partition_owners. */
    private String table;

    /** How long one poll waits for records. Default: 500 ms. */
    private Duration pollTimeout;

    /** At most this many records per poll. Default: 100. */
    private Integer maxPollRecords;

    /** Kafka's consumer session timeout. Default: 10 s. */
    private Duration sessionTimeout;

    /** Kafka's max.poll.interval.ms. Default: 60 s. */
    private Duration maxPollInterval;

    /** How long before the point of no return an apply stops. Default: 2 s. */
    private Duration safetyMargin;

    /** How often consumed offsets are committed to Kafka. Default: 5 s. */
    private Duration commitInterval;

    /** Each statement's timeout. Default: 5 s. */
    private Duration queryTimeout;

    /** How long closing waits for the running apply. Default: 30 s. */
    private Duration closeTimeout;

    /** Where records marked as poison go instead of stopping the owner. Default: none. */
    private String deadLetterTopic;

    public String getTopic() {
      return topic;
    }

    public void setTopic(String topic) {
      this.topic = topic;
    }

    public String getGroupId() {
      return groupId;
    }

    public void setGroupId(String groupId) {
      this.groupId = groupId;
    }

    public String getBootstrapServers() {
      return bootstrapServers;
    }

    public void setBootstrapServers(String bootstrapServers) {
      this.bootstrapServers = bootstrapServers;
    }

    public String getTable() {
      return table;
    }

    public void setTable(String table) {
      this.table = table;
    }

    public Duration getPollTimeout() {
      return pollTimeout;
    }

    public void setPollTimeout(Duration pollTimeout) {
      this.pollTimeout = pollTimeout;
    }

    public Integer getMaxPollRecords() {
      return maxPollRecords;
    }

    public void setMaxPollRecords(Integer maxPollRecords) {
      this.maxPollRecords = maxPollRecords;
    }

    public Duration getSessionTimeout() {
      return sessionTimeout;
    }

    public void setSessionTimeout(Duration sessionTimeout) {
      this.sessionTimeout = sessionTimeout;
    }

    public Duration getMaxPollInterval() {
      return maxPollInterval;
    }

    public void setMaxPollInterval(Duration maxPollInterval) {
      this.maxPollInterval = maxPollInterval;
    }

    public Duration getSafetyMargin() {
      return safetyMargin;
    }

    public void setSafetyMargin(Duration safetyMargin) {
      this.safetyMargin = safetyMargin;
    }

    public Duration getCommitInterval() {
      return commitInterval;
    }

    public void setCommitInterval(Duration commitInterval) {
      this.commitInterval = commitInterval;
    }

    public Duration getQueryTimeout() {
      return queryTimeout;
    }

    public void setQueryTimeout(Duration queryTimeout) {
      this.queryTimeout = queryTimeout;
    }

    public Duration getCloseTimeout() {
      return closeTimeout;
    }

    public void setCloseTimeout(Duration closeTimeout) {
      this.closeTimeout = closeTimeout;
    }

    public String getDeadLetterTopic() {
      return deadLetterTopic;
    }

    public void setDeadLetterTopic(String deadLetterTopic) {
      this.deadLetterTopic = deadLetterTopic;
    }
  }
}
