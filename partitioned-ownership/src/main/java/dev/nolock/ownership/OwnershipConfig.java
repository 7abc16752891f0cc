package dev.nolock.ownership;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.sql.SqlNames;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.function.Predicate;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.jooq.Name;

/**
 * The settings of one {@link PartitionOwner}: which topic and consumer group, who this instance is,
 * where the ownership table lives, and the timeouts. Immutable; build with {@link #custom(String,
 * String, String)}.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE}, owner id {@code <pid>-<8 random hex>}, poll timeout
 * 500 ms, at most 100 records per poll, session timeout 10 s (heartbeat a third of it), max poll
 * interval 60 s, safety margin 2 s, Kafka offset commits every 5 s, query timeout 5 s, idle
 * transaction timeout 30 s, backend retry backoff 100 ms doubling up to 5 s, close timeout 30 s, no
 * metrics, the system clock, no dead-letter topic (a record that fails for good stops the runner).
 */
public final class OwnershipConfig {

  public static final String DEFAULT_TABLE = "nolock_partition_owners";

  /** Kafka's own rule for topic names. */
  private static final Pattern TOPIC = Pattern.compile("[a-zA-Z0-9._-]{1,249}");

  /** Consumer settings the runner owns; each is set from this config or fixed by the design. */
  private static final Map<String, String> RESERVED =
      Map.of(
          ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, "bootstrapServers in custom(...)",
          ConsumerConfig.GROUP_ID_CONFIG, "the groupId in custom(...)",
          ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
              "nothing: offsets are committed by the runner after each apply",
          ConsumerConfig.AUTO_OFFSET_RESET_CONFIG,
              "nothing: positions come from the ownership table's last applied offset",
          ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, "the key deserializer of PartitionOwner",
          ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
              "the value deserializer of PartitionOwner",
          ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "maxPollRecords(...)",
          ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "sessionTimeout(...)",
          ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "sessionTimeout(...) (a third of it)",
          ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, "maxPollInterval(...)");

  /** Dead-letter producer settings the runner owns: the at-least-once guarantee rests on them. */
  private static final Map<String, String> RESERVED_DEAD_LETTER =
      Map.of(
          ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, "bootstrapServers in custom(...)",
          ProducerConfig.ACKS_CONFIG, "nothing: acks=all, so an acknowledged record is replicated",
          ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
              "nothing: the producer is idempotent, so its own retries write once",
          ProducerConfig.TRANSACTIONAL_ID_CONFIG, "nothing: the producer is not transactional",
          ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, "nothing: the record's key bytes are sent",
          ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG,
              "nothing: the record's value bytes are sent");

  private static final Set<String> KIP_848_REFUSED =
      Set.of(
          ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
          ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
          ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG);

  private final String bootstrapServers;
  private final String topic;
  private final String groupId;
  private final String ownerId;
  private final String table;
  private final Name tableName;
  private final Duration pollTimeout;
  private final int maxPollRecords;
  private final Duration sessionTimeout;
  private final Duration maxPollInterval;
  private final Duration safetyMargin;
  private final Duration commitInterval;
  private final Duration queryTimeout;
  private final Duration transactionIdleTimeout;
  private final Duration retryBaseDelay;
  private final Duration retryMaxDelay;
  private final Duration closeTimeout;
  private final MeterRegistry meterRegistry;
  private final String metricsInstanceName;
  private final LeaseClock clock;
  private final Map<String, Object> consumerProperties;

  /** The default of {@link Builder#maxConsecutiveDeadLetters}. */
  public static final int DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS = 10;

  private final String deadLetterTopic;
  private final Map<String, Object> deadLetterProducerProperties;
  private final int maxConsecutiveDeadLetters;
  private final Predicate<Throwable> deadLetterWhen;

  private OwnershipConfig(Builder b) {
    this.bootstrapServers = b.bootstrapServers;
    this.topic = b.topic;
    this.groupId = b.groupId;
    this.ownerId = b.ownerId;
    this.table = b.table;
    this.tableName = SqlNames.requireSqlIdentifier("ownership table", b.table);
    this.pollTimeout = b.pollTimeout;
    this.maxPollRecords = b.maxPollRecords;
    this.sessionTimeout = b.sessionTimeout;
    this.maxPollInterval = b.maxPollInterval;
    this.safetyMargin = b.safetyMargin;
    this.commitInterval = b.commitInterval;
    this.queryTimeout = b.queryTimeout;
    this.transactionIdleTimeout = b.transactionIdleTimeout;
    this.retryBaseDelay = b.retryBaseDelay;
    this.retryMaxDelay = b.retryMaxDelay;
    this.closeTimeout = b.closeTimeout;
    this.meterRegistry = b.meterRegistry;
    this.metricsInstanceName = b.metricsInstanceName;
    this.clock = b.clock;
    this.consumerProperties = Map.copyOf(b.consumerProperties);
    this.deadLetterTopic = b.deadLetterTopic;
    this.deadLetterProducerProperties = Map.copyOf(b.deadLetterProducerProperties);
    this.maxConsecutiveDeadLetters = b.maxConsecutiveDeadLetters;
    this.deadLetterWhen = b.deadLetterWhen;
    requireDeadLetterTopicAndPredicate(deadLetterTopic, b.deadLetterWhen != NO_POISON);
    if (deadLetterTopic == null && !deadLetterProducerProperties.isEmpty()) {
      throw new IllegalArgumentException(
          "deadLetterProducerProperty(...) was set without deadLetterTopic(...): set the"
              + " dead-letter topic too, or remove the producer settings.");
    }
    for (String wait :
        new String[] {
          ProducerConfig.MAX_BLOCK_MS_CONFIG, ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG
        }) {
      requireWithinPollInterval(wait, deadLetterProducerProperties.get(wait), maxPollInterval);
    }
    if (safetyMargin.compareTo(sessionTimeout) >= 0) {
      throw new IllegalArgumentException(
          "safetyMargin ("
              + safetyMargin
              + ") must be shorter than sessionTimeout ("
              + sessionTimeout
              + "), or no record could ever be applied; e.g. a third of the session timeout.");
    }
    Duration claimWindow = sessionTimeout.minus(safetyMargin);
    Duration maxPollTimeout = claimWindow.dividedBy(2);
    if (pollTimeout.compareTo(maxPollTimeout) > 0) {
      // A claim that failed is retried right after a poll, against the point of no return counted
      // from that poll's start; a poll with nothing to fetch waits the whole pollTimeout. Half the
      // window leaves the other half, at least a pollTimeout, for the claim and the applies after.
      throw new IllegalArgumentException(
          "pollTimeout ("
              + pollTimeout
              + ") must be at most half of sessionTimeout - safetyMargin ("
              + sessionTimeout
              + " - "
              + safetyMargin
              + " = "
              + claimWindow
              + "): a claim retried after a poll that waited the whole pollTimeout must still have"
              + " time before the point of no return for the claim and the applies after it."
              + " Lower pollTimeout to "
              + maxPollTimeout
              + " or less (the default is 500 ms), or raise sessionTimeout.");
    }
    if (maxPollInterval.compareTo(sessionTimeout) < 0) {
      throw new IllegalArgumentException(
          "maxPollInterval ("
              + maxPollInterval
              + ") is shorter than sessionTimeout ("
              + sessionTimeout
              + "); Kafka requires it to be at least as long.");
    }
    if (retryMaxDelay.compareTo(retryBaseDelay) < 0) {
      throw new IllegalArgumentException(
          "the retry backoff's maximum ("
              + retryMaxDelay
              + ") is below its base ("
              + retryBaseDelay
              + ")");
    }
  }

  /**
   * A builder with the defaults.
   *
   * @param bootstrapServers Kafka's {@code bootstrap.servers}, e.g. {@code "127.0.0.1:9092"}
   * @param topic the commands topic
   * @param groupId the consumer group; one group per application that applies the topic (it is part
   *     of the ownership row's key and the metrics' {@code name} tag)
   */
  public static Builder custom(String bootstrapServers, String topic, String groupId) {
    return new Builder(bootstrapServers, topic, groupId);
  }

  /** Kafka's bootstrap.servers, refused when null or blank; shared with ExactlyOnceConfig. */
  static String requireBootstrapServers(String bootstrapServers) {
    if (bootstrapServers == null || bootstrapServers.isBlank()) {
      throw new IllegalArgumentException(
          "bootstrapServers is "
              + (bootstrapServers == null ? "null" : "blank")
              + ": pass Kafka's bootstrap.servers, e.g. \"127.0.0.1:9092\"");
    }
    return bootstrapServers;
  }

  /**
   * The runner's thread waits for each dead-letter send ({@code producer.send} blocks up to {@code
   * max.block.ms}); a wait longer than {@code maxPollInterval} would make the member leave the
   * group while it waits.
   */
  private static void requireWithinPollInterval(
      String key, Object value, Duration maxPollInterval) {
    if (value == null) {
      return;
    }
    long millis;
    try {
      millis = Long.parseLong(value.toString().trim());
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(
          "The dead-letter producer setting '" + key + "' must be a number of milliseconds", e);
    }
    if (millis > maxPollInterval.toMillis()) {
      throw new IllegalArgumentException(
          "The dead-letter producer setting '"
              + key
              + "' ("
              + millis
              + " ms) is longer than maxPollInterval ("
              + maxPollInterval.toMillis()
              + " ms): the runner's thread waits for each dead-letter send, so it would be taken"
              + " out of the group while waiting. Set it to at most maxPollInterval (the wait for"
              + " the acknowledgement is also cut at the batch's point of no return).");
    }
  }

  /** The default of {@link Builder#deadLetterWhen}: no handler exception is known poison. */
  static final Predicate<Throwable> NO_POISON = failure -> false;

  /** At least 1; shared with ExactlyOnceConfig. */
  static int requireMaxConsecutiveDeadLetters(int max) {
    if (max < 1) {
      throw new IllegalArgumentException(
          "maxConsecutiveDeadLetters must be at least 1, got "
              + max
              + "; to stop at the first failed record, leave deadLetterTopic unset");
    }
    return max;
  }

  /**
   * Refuses {@code deadLetterWhen} without the topic, and the topic without {@code deadLetterWhen}
   * (nothing would ever go there: nolock dead-letters only what the predicate marks); shared with
   * ExactlyOnceConfig.
   */
  static void requireDeadLetterTopicAndPredicate(String deadLetterTopic, boolean predicateSet) {
    if (deadLetterTopic == null && predicateSet) {
      throw new IllegalArgumentException(
          "deadLetterWhen(...) was set without deadLetterTopic(...): set the dead-letter topic too,"
              + " or remove deadLetterWhen.");
    }
    if (deadLetterTopic != null && !predicateSet) {
      throw new IllegalArgumentException(
          "deadLetterTopic(\""
              + deadLetterTopic
              + "\") was set without deadLetterWhen(...): say which failures mean the record itself"
              + " is poison, e.g. your handler's validation exception: deadLetterWhen(e ->"
              + " Causes.of(e).stream().anyMatch(OrderRejected.class::isInstance)). nolock never"
              + " guesses: a parse error can come from a schema registry's truncated answer, a"
              + " constraint violation from a migration.");
    }
  }

  /**
   * A dead-letter topic: a Kafka topic name, not {@code source} (the runner would read its own dead
   * letters back as commands); shared with ExactlyOnceConfig.
   */
  static String requireDeadLetterTopic(String deadLetterTopic, String source) {
    if (deadLetterTopic == null
        || !TOPIC.matcher(deadLetterTopic).matches()
        || deadLetterTopic.equals(".")
        || deadLetterTopic.equals("..")) {
      throw new IllegalArgumentException(
          "The dead-letter topic '"
              + deadLetterTopic
              + "' is not a Kafka topic name: 1 to 249 of [a-zA-Z0-9._-], not \".\" or \"..\", e.g."
              + " \""
              + source
              + ".dlt\". Create it before the runner starts.");
    }
    if (deadLetterTopic.equals(source)) {
      throw new IllegalArgumentException(
          "The dead-letter topic is the topic the records come from ('"
              + source
              + "'): failed records would be read back and fail again. Use another topic, e.g."
              + " \""
              + source
              + ".dlt\".");
    }
    return deadLetterTopic;
  }

  static String requireTopic(String topic) {
    if (topic == null || !TOPIC.matcher(topic).matches()) {
      throw new IllegalArgumentException(
          "The topic '"
              + topic
              + "' is not a Kafka topic name: 1 to 249 of [a-zA-Z0-9._-], e.g. \"orders\".");
    }
    return topic;
  }

  public String bootstrapServers() {
    return bootstrapServers;
  }

  public String topic() {
    return topic;
  }

  public String groupId() {
    return groupId;
  }

  /** This instance's identity, written into the ownership row when it claims a partition. */
  public String ownerId() {
    return ownerId;
  }

  /** The ownership table, as configured ({@code "table"} or {@code "schema.table"}). */
  public String table() {
    return table;
  }

  /** The ownership table as a validated jOOQ name. */
  public Name tableName() {
    return tableName;
  }

  public Duration pollTimeout() {
    return pollTimeout;
  }

  public int maxPollRecords() {
    return maxPollRecords;
  }

  public Duration sessionTimeout() {
    return sessionTimeout;
  }

  public Duration maxPollInterval() {
    return maxPollInterval;
  }

  public Duration safetyMargin() {
    return safetyMargin;
  }

  public Duration commitInterval() {
    return commitInterval;
  }

  public Duration queryTimeout() {
    return queryTimeout;
  }

  public Duration transactionIdleTimeout() {
    return transactionIdleTimeout;
  }

  public Duration retryBaseDelay() {
    return retryBaseDelay;
  }

  public Duration retryMaxDelay() {
    return retryMaxDelay;
  }

  public Duration closeTimeout() {
    return closeTimeout;
  }

  /** Where the metrics go, from {@link Builder#metrics}; none by default. */
  public Option<MeterRegistry> meterRegistry() {
    return Option.of(meterRegistry);
  }

  /** The {@code name} tag of every series, from {@link Builder#metrics}; none by default. */
  public Option<String> metricsInstanceName() {
    return Option.of(metricsInstanceName);
  }

  public LeaseClock clock() {
    return clock;
  }

  /** Extra consumer settings given with {@link Builder#consumerProperty(String, Object)}. */
  public Map<String, Object> consumerProperties() {
    return consumerProperties;
  }

  /**
   * Where a record that fails for good (its deserializer or the handler throws) is sent, from
   * {@link Builder#deadLetterTopic}; none by default, and then such a record stops the runner.
   */
  public Option<String> deadLetterTopic() {
    return Option.of(deadLetterTopic);
  }

  /**
   * Extra settings of the dead-letter producer, from {@link Builder#deadLetterProducerProperty}.
   */
  public Map<String, Object> deadLetterProducerProperties() {
    return deadLetterProducerProperties;
  }

  /**
   * How many records in a row one runner dead-letters before it stops, from {@link
   * Builder#maxConsecutiveDeadLetters}.
   */
  public int maxConsecutiveDeadLetters() {
    return maxConsecutiveDeadLetters;
  }

  /**
   * Which handler exceptions mark their record as poison, from {@link Builder#deadLetterWhen}; by
   * default none.
   */
  public Predicate<Throwable> deadLetterWhen() {
    return deadLetterWhen;
  }

  /** True when the extra settings select KIP-848's {@code group.protocol=consumer}. */
  public boolean usesConsumerGroupProtocol() {
    Object protocol = consumerProperties.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG);
    return protocol != null && "consumer".equalsIgnoreCase(protocol.toString());
  }

  @Override
  public String toString() {
    return "OwnershipConfig[topic="
        + topic
        + ", group="
        + groupId
        + ", owner="
        + ownerId
        + ", table="
        + table
        + ", sessionTimeout="
        + sessionTimeout
        + "]";
  }

  /** Builds an {@link OwnershipConfig}; each setter validates at once. */
  public static final class Builder {
    private final String bootstrapServers;
    private final String topic;
    private final String groupId;
    private String ownerId = defaultOwnerId();
    private String table = DEFAULT_TABLE;
    private Duration pollTimeout = Duration.ofMillis(500);
    private int maxPollRecords = 100;
    private Duration sessionTimeout = Duration.ofSeconds(10);
    private Duration maxPollInterval = Duration.ofSeconds(60);
    private Duration safetyMargin = Duration.ofSeconds(2);
    private Duration commitInterval = Duration.ofSeconds(5);
    private Duration queryTimeout = Duration.ofSeconds(5);
    private Duration transactionIdleTimeout = Duration.ofSeconds(30);
    private Duration retryBaseDelay = Duration.ofMillis(100);
    private Duration retryMaxDelay = Duration.ofSeconds(5);
    private Duration closeTimeout = Duration.ofSeconds(30);
    private MeterRegistry meterRegistry;
    private String metricsInstanceName;
    private LeaseClock clock = LeaseClock.system();
    private final Map<String, Object> consumerProperties = new LinkedHashMap<>();
    private String deadLetterTopic;
    private final Map<String, Object> deadLetterProducerProperties = new LinkedHashMap<>();
    private int maxConsecutiveDeadLetters = DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS;
    private Predicate<Throwable> deadLetterWhen = NO_POISON;

    private Builder(String bootstrapServers, String topic, String groupId) {
      this.bootstrapServers = requireBootstrapServers(bootstrapServers);
      this.topic = requireTopic(topic);
      this.groupId = Names.requireName("consumer group id", groupId, 100);
    }

    /**
     * This instance's identity in the ownership table; unique per running instance (the default is
     * the process id and 8 random hex digits). At most 255 characters.
     */
    public Builder ownerId(String ownerId) {
      this.ownerId = Names.requireName("owner id", ownerId, 255);
      return this;
    }

    /** The ownership table, {@code "table"} or {@code "schema.table"}, lower case. */
    public Builder table(String table) {
      SqlNames.requireSqlIdentifier("ownership table", table);
      this.table = table;
      return this;
    }

    /**
     * How long one poll waits for records; 10 ms to 30 s, and at most half of {@code sessionTimeout
     * - safetyMargin}, so that a claim retried after a poll that waited this long still has time
     * before the point of no return, for the claim and the applies after it.
     */
    public Builder pollTimeout(Duration pollTimeout) {
      this.pollTimeout =
          between("pollTimeout", pollTimeout, Duration.ofMillis(10), Duration.ofSeconds(30));
      return this;
    }

    /**
     * At most this many records per poll (1 to 10,000). Smaller batches reach the next poll, and
     * with it a pending rebalance, sooner.
     */
    public Builder maxPollRecords(int maxPollRecords) {
      if (maxPollRecords < 1 || maxPollRecords > 10_000) {
        throw new IllegalArgumentException(
            "maxPollRecords must be 1 to 10000, got " + maxPollRecords);
      }
      this.maxPollRecords = maxPollRecords;
      return this;
    }

    /**
     * The consumer's session timeout (1 s to 5 min, within the broker's {@code
     * group.min/max.session.timeout.ms}); the heartbeat interval is a third of it. A member that
     * does not heartbeat for this long loses its partitions. It is also the runner's point of no
     * return: no apply starts later than {@code sessionTimeout - safetyMargin} after the poll that
     * fetched the record was sent. With {@code group.protocol=consumer} the broker's {@code
     * group.consumer.session.timeout.ms} decides; set this to the same value.
     */
    public Builder sessionTimeout(Duration sessionTimeout) {
      this.sessionTimeout =
          between("sessionTimeout", sessionTimeout, Duration.ofSeconds(1), Duration.ofMinutes(5));
      return this;
    }

    /** Kafka's {@code max.poll.interval.ms}: at least the session timeout, at most 1 hour. */
    public Builder maxPollInterval(Duration maxPollInterval) {
      this.maxPollInterval =
          between("maxPollInterval", maxPollInterval, Duration.ofSeconds(1), Duration.ofHours(1));
      return this;
    }

    /**
     * Subtracted from the session timeout for the point of no return (above); shorter than the
     * session timeout. Covers scheduling delay and the time one apply takes.
     */
    public Builder safetyMargin(Duration safetyMargin) {
      this.safetyMargin =
          between("safetyMargin", safetyMargin, Duration.ZERO, Duration.ofMinutes(5));
      return this;
    }

    /**
     * How often applied positions are committed to Kafka (100 ms to 10 min). They are for lag tools
     * only: where a new owner starts is the ownership table's last applied offset.
     */
    public Builder commitInterval(Duration commitInterval) {
      this.commitInterval =
          between("commitInterval", commitInterval, Duration.ofMillis(100), Duration.ofMinutes(10));
      return this;
    }

    /**
     * PostgreSQL's {@code statement_timeout} in the runner's transactions (100 ms to 10 min): for
     * every statement of an apply transaction, the handler's included, and for claims. A claim that
     * waits longer for an apply in flight is retried after a backoff.
     */
    public Builder queryTimeout(Duration queryTimeout) {
      this.queryTimeout =
          between("queryTimeout", queryTimeout, Duration.ofMillis(100), Duration.ofMinutes(10));
      return this;
    }

    /**
     * PostgreSQL's {@code idle_in_transaction_session_timeout} for apply transactions (whole
     * milliseconds, zero to switch off, at most 1 hour). An owner paused inside an apply
     * transaction holds its ownership row's lock and so delays the next owner's claim; the server
     * ends such a session after this long and rolls the apply back, and the owner retries the
     * record when it wakes. Set it above the longest pause between the handler's own statements.
     */
    public Builder transactionIdleTimeout(Duration transactionIdleTimeout) {
      this.transactionIdleTimeout =
          between(
              "transactionIdleTimeout", transactionIdleTimeout, Duration.ZERO, Duration.ofHours(1));
      return this;
    }

    /**
     * The backoff after PostgreSQL failures (unreachable, timed out, serialization failure): {@code
     * base} doubling up to {@code max}, with full jitter. The runner retries as long as it owns the
     * partition; the records are fetched again after each failure.
     */
    public Builder retryBackoff(Duration base, Duration max) {
      this.retryBaseDelay =
          between("retry base delay", base, Duration.ofMillis(1), Duration.ofMinutes(1));
      this.retryMaxDelay =
          between("retry max delay", max, Duration.ofMillis(1), Duration.ofMinutes(10));
      return this;
    }

    /**
     * How long {@link PartitionOwner#close()} waits for the loop to stop; the dead-letter producer
     * may deliver a send still pending (one not acknowledged by the point of no return, so not
     * recorded as applied) only in what is left of it once the consumer has closed; 1 s to 5 min.
     */
    public Builder closeTimeout(Duration closeTimeout) {
      this.closeTimeout =
          between("closeTimeout", closeTimeout, Duration.ofSeconds(1), Duration.ofMinutes(5));
      return this;
    }

    /**
     * Records metrics in {@code registry} (see the README's Metrics), every series tagged {@code
     * component="ownership"} and {@code name=instanceName}. Without it nothing is recorded.
     *
     * @param instanceName names this runner in the registry, at most {@value
     *     CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters; give each runner its own, so
     *     that two in one registry stay apart. Never a per-record value such as a key.
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      if (registry == null) {
        throw new IllegalArgumentException(
            "metrics(null, instanceName): pass the MeterRegistry to record in, or leave metrics"
                + " unset to record nothing");
      }
      this.metricsInstanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.meterRegistry = registry;
      return this;
    }

    /** The monotonic clock for the point of no return and backoff. */
    public Builder clock(LeaseClock clock) {
      this.clock =
          required(clock, "clock(null): pass a LeaseClock, e.g. LeaseClock.system() (the default)");
      return this;
    }

    /**
     * Any other Kafka consumer setting ({@code client.id}, security, {@code metadata.max.age.ms},
     * {@code isolation.level}, {@code group.protocol}, ...). The settings the runner owns are
     * refused with the setter to use instead.
     */
    public Builder consumerProperty(String key, Object value) {
      required(key, "A null setting key: pass the Kafka setting's name, e.g. \"client.id\"");
      required(
          value,
          "The setting '"
              + key
              + "' has a null value: pass its value, or leave the setting out for Kafka's"
              + " default");
      String instead = RESERVED.get(key);
      if (instead != null) {
        throw new IllegalArgumentException(
            "The consumer setting '" + key + "' belongs to the runner; use " + instead + ".");
      }
      consumerProperties.put(key, value);
      return this;
    }

    /**
     * Sends a record whose failure (its key or value deserializer's, or its handler's) {@link
     * #deadLetterWhen} marks as poison to {@code deadLetterTopic} instead of stopping the runner;
     * {@code build()} refuses the topic without the predicate. A transient failure (a transient
     * SQLState, a network exception, a Kafka retriable exception, a backend unavailable) is
     * retried; a schema or privilege error, an interrupt, an {@link Error}, and any deserializer or
     * handler failure not marked stop the runner (a handler's {@code IOException} is retried), as
     * without this setting: what is not known to be the record's fault is never skipped. The record
     * goes with its original key and value bytes and headers, plus {@code nolock.dlt.*} headers
     * naming its topic, partition, offset and the exception's class names (never its message); once
     * the broker has acknowledged it, the record's offset is recorded as applied, fenced by the
     * owner epoch like any apply, and the partition moves on.
     *
     * <p>At least once, and "failed at least once": a runner that stops, is fenced or loses its
     * database answer between the acknowledgement and the offset write leaves the record to the
     * next attempt, which runs the handler again and may apply it; a tool that replays dead letters
     * must check whether the record was applied first. Consumers of the dead-letter topic dedupe by
     * the {@code nolock.dlt.topic}, {@code nolock.dlt.partition} and {@code nolock.dlt.offset}
     * headers. A send that fails or times out is never taken as handled: a retriable failure backs
     * off and tries the record again, any other stops the runner. The topic must exist (create it
     * like the commands topic); by default nothing is sent anywhere.
     *
     * @param deadLetterTopic a Kafka topic name other than the commands topic
     */
    public Builder deadLetterTopic(String deadLetterTopic) {
      this.deadLetterTopic = requireDeadLetterTopic(deadLetterTopic, topic);
      return this;
    }

    /**
     * Any other setting of the dead-letter producer: security ({@code security.protocol}, {@code
     * sasl.*}, {@code ssl.*}), {@code client.id}, or its timeouts ({@code max.block.ms} and {@code
     * delivery.timeout.ms} default to the session timeout, and may be at most {@code
     * maxPollInterval}, checked by {@link #build()}). The runner's thread waits for the
     * acknowledgement only until the batch's point of no return, measured again after {@code
     * producer.send} returns (which may block up to {@code max.block.ms}); a send not acknowledged
     * by then, or that returned past it, is not taken as handled (the record is tried again). The
     * settings the guarantee rests on are refused.
     */
    public Builder deadLetterProducerProperty(String key, Object value) {
      required(key, "A null setting key: pass the Kafka setting's name, e.g. \"client.id\"");
      required(
          value,
          "The setting '"
              + key
              + "' has a null value: pass its value, or leave the setting out for the default");
      String instead = RESERVED_DEAD_LETTER.get(key);
      if (instead != null) {
        throw new IllegalArgumentException(
            "The dead-letter producer setting '" + key + "' belongs to the runner; use " + instead);
      }
      deadLetterProducerProperties.put(key, value);
      return this;
    }

    /**
     * A circuit breaker for the dead-letter topic: once one runner (one {@code PartitionOwner}
     * instance, counting across all the partitions it owns) has dead-lettered this many records in
     * a row (no record applied between them), the next record that fails stops the runner, as it
     * would without a dead-letter topic, for so many failures are a systemic fault (a bug just
     * deployed, a dependency refusing every call), not poison records. A record applied in any of
     * its partitions starts the count again; each runner of the group counts on its own. Default
     * {@value #DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS}.
     *
     * @param max at least 1
     */
    public Builder maxConsecutiveDeadLetters(int max) {
      this.maxConsecutiveDeadLetters = requireMaxConsecutiveDeadLetters(max);
      return this;
    }

    /**
     * Which failures mean the record itself is poison, so that it goes to {@link #deadLetterTopic}
     * instead of stopping the runner; required with the topic. Nothing else is ever dead-lettered:
     * no exception type tells for sure that the record is at fault. A parse error may come from a
     * schema registry's truncated answer or a stale connection, a data-binding error from a deploy,
     * a SQL data error (class 22 or 23) from a migration that added a constraint, a parent row in a
     * partition not applied yet, or a writer outside nolock.
     *
     * <p>Consulted once per failure, and only after the fixed rules: an {@link Error}, an interrupt
     * or a schema or privilege error (SQLState class 42, {@code 3F000}) stops the runner, and a
     * transient failure (a transient SQLState, a Kafka retriable exception, a backend unavailable,
     * a lost lease, a network exception) is retried, whatever the predicate says. It is consulted
     * before a handler's other {@code IOException}s are retried, so a parse error of the handler's
     * own can be marked. Mark only exceptions that no retry or fix elsewhere can cure (a validation
     * error of the record's content): a record marked here is skipped, which is worse than a stop
     * if the fault was not the record's. An exception the predicate throws stops the runner, naming
     * the record, with the record's failure as its cause; a predicate that is slow delays the
     * record like a slow handler (past the batch's point of no return, the record is tried again).
     * Requires {@link #deadLetterTopic}.
     *
     * @param poison tested on the handler's exception as thrown, or for a deserializer on Kafka's
     *     {@code RecordDeserializationException} whose cause is the deserializer's (walk the chain
     *     with {@code Causes.of(e)}, which stops at a loop)
     */
    public Builder deadLetterWhen(Predicate<Throwable> poison) {
      this.deadLetterWhen =
          required(poison, "A null deadLetterWhen: pass a predicate, e.g. e -> e instanceof X");
      return this;
    }

    public OwnershipConfig build() {
      if ("consumer"
          .equalsIgnoreCase(
              String.valueOf(consumerProperties.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG)))) {
        for (String key : KIP_848_REFUSED) {
          if (consumerProperties.containsKey(key)) {
            throw new IllegalArgumentException(
                "'"
                    + key
                    + "' cannot be set with group.protocol=consumer (KIP-848): the broker"
                    + " decides it. Remove it.");
          }
        }
      }
      return new OwnershipConfig(this);
    }

    private static String defaultOwnerId() {
      long pid = ProcessHandle.current().pid();
      return pid + "-" + UUID.randomUUID().toString().substring(0, 8);
    }

    static Duration between(String what, Duration value, Duration min, Duration max) {
      required(value, what + " is null: pass a Duration between " + min + " and " + max);
      if (value.compareTo(min) < 0 || value.compareTo(max) > 0) {
        throw new IllegalArgumentException(
            what + " must be between " + min + " and " + max + ", got " + value);
      }
      return value;
    }

    private static <T> T required(T value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
      return value;
    }
  }
}
