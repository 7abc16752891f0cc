package dev.nolock.ownership;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.Names;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;

/**
 * The settings of one {@link ExactlyOncePipeline}. Immutable; build with {@link #custom(String,
 * String, String, String)}.
 *
 * <p>Defaults: poll timeout 500 ms, at most 100 records per poll (and per transaction), session
 * timeout 10 s, max poll interval 60 s, transaction timeout 60 s, commit retry timeout 5 min, close
 * timeout 30 s, no metrics, no dead-letter topic (a record that fails for good stops the pipeline).
 */
public final class ExactlyOnceConfig {

  private static final Set<String> RESERVED_CONSUMER =
      Set.of(
          ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG,
          ConsumerConfig.GROUP_ID_CONFIG,
          ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG,
          ConsumerConfig.ISOLATION_LEVEL_CONFIG,
          ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG,
          ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG,
          ConsumerConfig.MAX_POLL_RECORDS_CONFIG,
          ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG,
          ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
          ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG);

  private static final Set<String> RESERVED_PRODUCER =
      Set.of(
          ProducerConfig.BOOTSTRAP_SERVERS_CONFIG,
          ProducerConfig.TRANSACTIONAL_ID_CONFIG,
          ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG,
          ProducerConfig.ACKS_CONFIG,
          ProducerConfig.TRANSACTION_TIMEOUT_CONFIG,
          ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG,
          ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG);

  private final String bootstrapServers;
  private final String inputTopic;
  private final String groupId;
  private final String transactionalId;
  private final Duration pollTimeout;
  private final int maxPollRecords;
  private final Duration sessionTimeout;
  private final Duration maxPollInterval;
  private final Duration transactionTimeout;
  private final Duration commitRetryTimeout;
  private final Duration closeTimeout;
  private final MeterRegistry meterRegistry;
  private final String metricsInstanceName;
  private final Map<String, Object> consumerProperties;
  private final Map<String, Object> producerProperties;
  private final String deadLetterTopic;
  private final int maxConsecutiveDeadLetters;
  private final Predicate<Throwable> deadLetterWhen;

  private ExactlyOnceConfig(Builder b) {
    this.bootstrapServers = b.bootstrapServers;
    this.inputTopic = b.inputTopic;
    this.groupId = b.groupId;
    this.transactionalId = b.transactionalId;
    this.pollTimeout = b.pollTimeout;
    this.maxPollRecords = b.maxPollRecords;
    this.sessionTimeout = b.sessionTimeout;
    this.maxPollInterval = b.maxPollInterval;
    this.transactionTimeout = b.transactionTimeout;
    this.commitRetryTimeout = b.commitRetryTimeout;
    this.closeTimeout = b.closeTimeout;
    this.meterRegistry = b.meterRegistry;
    this.metricsInstanceName = b.metricsInstanceName;
    this.consumerProperties = Map.copyOf(b.consumerProperties);
    this.producerProperties = Map.copyOf(b.producerProperties);
    this.deadLetterTopic = b.deadLetterTopic;
    this.maxConsecutiveDeadLetters = b.maxConsecutiveDeadLetters;
    this.deadLetterWhen = b.deadLetterWhen;
    OwnershipConfig.requireDeadLetterTopicAndPredicate(
        deadLetterTopic, b.deadLetterWhen != OwnershipConfig.NO_POISON);
    if (maxPollInterval.compareTo(sessionTimeout) < 0) {
      throw new IllegalArgumentException(
          "maxPollInterval ("
              + maxPollInterval
              + ") is shorter than sessionTimeout ("
              + sessionTimeout
              + "); Kafka requires it to be at least as long.");
    }
  }

  /**
   * A builder with the defaults.
   *
   * @param transactionalId this instance's {@code transactional.id}: stable across restarts of the
   *     same instance (so a restarted instance fences its own zombie) and distinct between
   *     instances that run at the same time
   */
  public static Builder custom(
      String bootstrapServers, String inputTopic, String groupId, String transactionalId) {
    return new Builder(bootstrapServers, inputTopic, groupId, transactionalId);
  }

  public String bootstrapServers() {
    return bootstrapServers;
  }

  public String inputTopic() {
    return inputTopic;
  }

  public String groupId() {
    return groupId;
  }

  public String transactionalId() {
    return transactionalId;
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

  public Duration transactionTimeout() {
    return transactionTimeout;
  }

  public Duration commitRetryTimeout() {
    return commitRetryTimeout;
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

  public Map<String, Object> consumerProperties() {
    return consumerProperties;
  }

  public Map<String, Object> producerProperties() {
    return producerProperties;
  }

  /**
   * Where an input record that fails for good goes, from {@link Builder#deadLetterTopic}; none by
   * default, and then such a record stops the pipeline.
   */
  public Option<String> deadLetterTopic() {
    return Option.of(deadLetterTopic);
  }

  /**
   * How many input records in a row the pipeline dead-letters before it stops, from {@link
   * Builder#maxConsecutiveDeadLetters}.
   */
  public int maxConsecutiveDeadLetters() {
    return maxConsecutiveDeadLetters;
  }

  /**
   * Which failures (a deserializer's, the transform's, a serializer's) mark their input record as
   * poison, from {@link Builder#deadLetterWhen}; required with a dead-letter topic.
   */
  public Predicate<Throwable> deadLetterWhen() {
    return deadLetterWhen;
  }

  @Override
  public String toString() {
    return "ExactlyOnceConfig[input="
        + inputTopic
        + ", group="
        + groupId
        + ", transactionalId="
        + transactionalId
        + "]";
  }

  /** Builds an {@link ExactlyOnceConfig}; each setter validates at once. */
  public static final class Builder {
    private final String bootstrapServers;
    private final String inputTopic;
    private final String groupId;
    private final String transactionalId;
    private Duration pollTimeout = Duration.ofMillis(500);
    private int maxPollRecords = 100;
    private Duration sessionTimeout = Duration.ofSeconds(10);
    private Duration maxPollInterval = Duration.ofSeconds(60);
    private Duration transactionTimeout = Duration.ofSeconds(60);
    private Duration commitRetryTimeout = Duration.ofMinutes(5);
    private Duration closeTimeout = Duration.ofSeconds(30);
    private MeterRegistry meterRegistry;
    private String metricsInstanceName;
    private final Map<String, Object> consumerProperties = new LinkedHashMap<>();
    private final Map<String, Object> producerProperties = new LinkedHashMap<>();
    private String deadLetterTopic;
    private int maxConsecutiveDeadLetters = OwnershipConfig.DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS;
    private Predicate<Throwable> deadLetterWhen = OwnershipConfig.NO_POISON;

    private Builder(
        String bootstrapServers, String inputTopic, String groupId, String transactionalId) {
      this.bootstrapServers = OwnershipConfig.requireBootstrapServers(bootstrapServers);
      this.inputTopic = OwnershipConfig.requireTopic(inputTopic);
      this.groupId = Names.requireName("consumer group id", groupId, 100);
      this.transactionalId = Names.requireName("transactional.id", transactionalId, 255);
    }

    /** How long one poll waits for records; 10 ms to 30 s. */
    public Builder pollTimeout(Duration pollTimeout) {
      this.pollTimeout =
          OwnershipConfig.Builder.between(
              "pollTimeout", pollTimeout, Duration.ofMillis(10), Duration.ofSeconds(30));
      return this;
    }

    /** At most this many records per poll, and so per transaction; 1 to 10,000. */
    public Builder maxPollRecords(int maxPollRecords) {
      if (maxPollRecords < 1 || maxPollRecords > 10_000) {
        throw new IllegalArgumentException(
            "maxPollRecords must be 1 to 10000, got " + maxPollRecords);
      }
      this.maxPollRecords = maxPollRecords;
      return this;
    }

    /** The consumer's session timeout, 1 s to 5 min; the heartbeat interval is a third of it. */
    public Builder sessionTimeout(Duration sessionTimeout) {
      this.sessionTimeout =
          OwnershipConfig.Builder.between(
              "sessionTimeout", sessionTimeout, Duration.ofSeconds(1), Duration.ofMinutes(5));
      return this;
    }

    /** Kafka's {@code max.poll.interval.ms}; at least the session timeout. */
    public Builder maxPollInterval(Duration maxPollInterval) {
      this.maxPollInterval =
          OwnershipConfig.Builder.between(
              "maxPollInterval", maxPollInterval, Duration.ofSeconds(1), Duration.ofHours(1));
      return this;
    }

    /**
     * The producer's {@code transaction.timeout.ms} (1 s to 15 min, within the broker's {@code
     * transaction.max.timeout.ms}): a transaction left open longer is aborted by the broker.
     */
    public Builder transactionTimeout(Duration transactionTimeout) {
      this.transactionTimeout =
          OwnershipConfig.Builder.between(
              "transactionTimeout",
              transactionTimeout,
              Duration.ofSeconds(1),
              Duration.ofMinutes(15));
      return this;
    }

    /**
     * How long the pipeline keeps calling {@code commitTransaction()} (or {@code
     * abortTransaction()}) again after it timed out ({@code max.block.ms}), counted from the first
     * call, before it stops with a {@link dev.nolock.patterns.BackendUnavailableException}: the
     * transaction's outcome unknown. 1 s to 1 h; make it a few times the producer's {@code
     * max.block.ms} (60 s unless set with {@link #producerProperty}), since each call waits that
     * long.
     */
    public Builder commitRetryTimeout(Duration commitRetryTimeout) {
      this.commitRetryTimeout =
          OwnershipConfig.Builder.between(
              "commitRetryTimeout", commitRetryTimeout, Duration.ofSeconds(1), Duration.ofHours(1));
      return this;
    }

    /** How long {@link ExactlyOncePipeline#close()} waits; 1 s to 5 min. */
    public Builder closeTimeout(Duration closeTimeout) {
      this.closeTimeout =
          OwnershipConfig.Builder.between(
              "closeTimeout", closeTimeout, Duration.ofSeconds(1), Duration.ofMinutes(5));
      return this;
    }

    /**
     * Records metrics in {@code registry} (see the README's Metrics), every series tagged {@code
     * component="exactly_once"} and {@code name=instanceName}. Without it nothing is recorded.
     *
     * @param instanceName names this pipeline in the registry, at most {@value
     *     CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters; give each pipeline its own, so
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

    /** Any other consumer setting; the ones the pipeline owns are refused. */
    public Builder consumerProperty(String key, Object value) {
      refuse(key, value, RESERVED_CONSUMER, "consumer");
      consumerProperties.put(key, value);
      return this;
    }

    /** Any other producer setting; the ones the pipeline owns are refused. */
    public Builder producerProperty(String key, Object value) {
      refuse(key, value, RESERVED_PRODUCER, "producer");
      producerProperties.put(key, value);
      return this;
    }

    private static void refuse(String key, Object value, Set<String> reserved, String what) {
      required(key, "A null setting key: pass the Kafka setting's name, e.g. \"client.id\"");
      required(
          value,
          "The setting '"
              + key
              + "' has a null value: pass its value, or leave the setting out for Kafka's"
              + " default");
      if (reserved.contains(key)) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " setting '"
                + key
                + "' belongs to the pipeline (exactly-once needs it as the pipeline sets it,"
                + " or it has a builder method); remove it.");
      }
    }

    /**
     * Sends an input record whose failure (a deserializer's, the transform's, or a serializer's of
     * one of its outputs) {@link #deadLetterWhen} marks as poison ({@code build()} refuses the
     * topic without the predicate) to {@code deadLetterTopic} instead of stopping the pipeline, in
     * the batch's transaction, with the input offsets: exactly once for {@code read_committed}
     * readers of the dead-letter topic, as the outputs are. The record goes with its original key
     * and value bytes and headers, plus {@code nolock.dlt.*} headers naming its topic, partition,
     * offset and the exception's class names (never its message). A transient failure (a network
     * exception, a Kafka retriable exception, a backend unavailable, a transient SQLState) aborts
     * the batch and retries it after a backoff; an {@link Error}, an interrupt, a schema error and
     * any failure not marked stop the pipeline, as without this setting. The topic must exist; a
     * send to it that fails aborts the transaction, and the batch is tried again, never skipped.
     *
     * @param deadLetterTopic a Kafka topic name other than the input topic
     */
    public Builder deadLetterTopic(String deadLetterTopic) {
      this.deadLetterTopic = OwnershipConfig.requireDeadLetterTopic(deadLetterTopic, inputTopic);
      return this;
    }

    /**
     * A circuit breaker for the dead-letter topic, per pipeline (one {@code ExactlyOncePipeline}
     * instance, counting across all its input partitions): once this many input records in a row
     * were dead-lettered (none transformed between them), the next one that fails aborts the
     * transaction and stops the pipeline, as without a dead-letter topic: so many failures are a
     * systemic fault, not poison records. A record transformed in any of its partitions starts the
     * count again. Default {@value OwnershipConfig#DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS}.
     *
     * @param max at least 1
     */
    public Builder maxConsecutiveDeadLetters(int max) {
      this.maxConsecutiveDeadLetters = OwnershipConfig.requireMaxConsecutiveDeadLetters(max);
      return this;
    }

    /**
     * Which failures mean the input record itself is poison, so that it goes to {@link
     * #deadLetterTopic} instead of stopping the pipeline; required with the topic. Nothing else is
     * ever dead-lettered: no exception type tells for sure that the record is at fault (a parse
     * error may be a registry's truncated answer, a serializer's failure the transform's bug, a SQL
     * data error a migration's new constraint). A predicate that is slow delays the batch like a
     * slow transform.
     *
     * <p>Consulted once per failure, and only after the fixed rules: an {@link Error}, an interrupt
     * or a schema error stops the pipeline, and a transient failure is retried, whatever the
     * predicate says. Mark only exceptions that no retry or fix elsewhere can cure: a record marked
     * here is skipped. An exception the predicate throws aborts the transaction and stops the
     * pipeline, naming the record, with the record's failure as its cause. Requires {@link
     * #deadLetterTopic}.
     *
     * @param poison tested on the transform's or serializer's exception as thrown, or for a
     *     deserializer on Kafka's {@code RecordDeserializationException} whose cause is the
     *     deserializer's (walk the chain with {@code Causes.of(e)}, which stops at a loop)
     */
    public Builder deadLetterWhen(Predicate<Throwable> poison) {
      this.deadLetterWhen =
          required(poison, "A null deadLetterWhen: pass a predicate, e.g. e -> e instanceof X");
      return this;
    }

    public ExactlyOnceConfig build() {
      return new ExactlyOnceConfig(this);
    }

    private static <T> T required(T value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
      return value;
    }
  }
}
