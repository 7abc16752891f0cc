package dev.nolock.ownership;

import dev.nolock.ownership.internal.DeadLetters;
import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.OwnerLoop;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.OwnershipMetrics;
import dev.nolock.ownership.internal.RecordDecoder;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.ownership.internal.StopReason;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.sql.SqlErrors;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One instance of the single-writer runner: a member of a consumer group that claims each partition
 * it is assigned in the ownership table with a new owner epoch, and applies the partition's records
 * in offset order, each in one PostgreSQL transaction that is refused if the epoch has moved on.
 *
 * <p>Guarantees, for every (group, topic, partition), as long as state changes go through the
 * handler's transaction:
 *
 * <ul>
 *   <li><b>Each record's change commits at most once</b>, and the records of a partition commit in
 *       offset order: the transaction advances the partition's last applied offset only forward, so
 *       a replay after a rebalance is a no-op ({@code REPLAY}, counted).
 *   <li><b>Only the current owner writes.</b> A claim bumps the epoch; every later apply by an
 *       older epoch is refused as a whole ({@code FENCED}, counted), however long its owner was
 *       paused. The handler gets the epoch as a {@link FencingToken} for writes elsewhere.
 *   <li><b>Nothing is skipped.</b> A new owner starts at the last applied offset + 1, read from the
 *       table, not from Kafka's committed offsets; records deleted by retention before they were
 *       applied stop the runner instead of being skipped (limits: the README's "Nothing is
 *       skipped", for records deleted before a partition's row was recorded and for compacted
 *       topics).
 *   <li><b>The topic keeps its partition count.</b> The count is recorded in the table; a runner
 *       that sees another one stops with {@link PartitionCountChangedException}.
 * </ul>
 *
 * <p>A record that fails for good (its deserializer or the handler throws) stops the runner, unless
 * {@link OwnershipConfig.Builder#deadLetterTopic} is set: then it is sent there, and recorded as
 * applied once the broker has acknowledged it (at least once in the dead-letter topic; a dead
 * letter means the record failed at least once, not that it was never applied). Only a record known
 * to be poison is dead-lettered: one {@link OwnershipConfig.Builder#deadLetterWhen} marks. A
 * transient failure, and any other {@code IOException} of the handler, is retried; a schema error,
 * an interrupt, an {@link Error}, a failure of unknown cause and any handler exception not marked
 * stop the runner, as without the topic; so does a failure after {@link
 * OwnershipConfig#maxConsecutiveDeadLetters()} dead letters in a row.
 *
 * <p>Lifecycle: {@link #create}, {@link #createTableIfMissing()} (or your migration), {@link
 * #start()}, and {@link #close()}. The loop runs on one thread of its own; watch {@link
 * #failure()}.
 */
public final class PartitionOwner<K, V> implements AutoCloseable {

  private static final Logger log = LoggerFactory.getLogger(PartitionOwner.class);

  private final OwnershipConfig config;
  private final DSLContext dsl;
  private final OwnerLoop<K, V> loop;
  private final Object lifecycle = new Object();
  private Thread thread;
  private volatile Throwable failure;
  private volatile boolean closed;

  private PartitionOwner(
      DataSource dataSource,
      OwnershipConfig config,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      RecordHandler<K, V> handler,
      Safeguards safeguards,
      OwnerEvents events) {
    this.config = Objects.requireNonNull(config, "config");
    Objects.requireNonNull(dataSource, "dataSource");
    Objects.requireNonNull(keyDeserializer, "keyDeserializer");
    Objects.requireNonNull(valueDeserializer, "valueDeserializer");
    Objects.requireNonNull(handler, "handler");
    this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
    MeterRegistry registry = config.meterRegistry().getOrElse(CompositeMeterRegistry::new);
    // Bytes: the loop runs the deserializers, so that a record they cannot read keeps its bytes
    // for the dead-letter topic instead of failing the poll.
    KafkaConsumer<byte[], byte[]> consumer =
        new KafkaConsumer<>(
            consumerProperties(config), new ByteArrayDeserializer(), new ByteArrayDeserializer());
    DeadLetters deadLetters;
    try {
      deadLetters =
          config
              .deadLetterTopic()
              .map(
                  topic ->
                      new DeadLetters(
                          new KafkaProducer<>(
                              deadLetterProducerProperties(config),
                              new ByteArraySerializer(),
                              new ByteArraySerializer()),
                          topic))
              .getOrNull();
    } catch (RuntimeException e) {
      consumer.close(CloseOptions.timeout(Duration.ZERO));
      throw e;
    }
    this.loop =
        new OwnerLoop<>(
            config,
            consumer,
            new RecordDecoder<>(keyDeserializer, valueDeserializer),
            deadLetters,
            dsl,
            handler,
            safeguards,
            events,
            partitions ->
                new OwnershipMetrics(
                    registry,
                    config.metricsInstanceName().getOrElse(config.groupId()),
                    config.topic(),
                    partitions));
  }

  /**
   * A runner, not started yet. The Kafka consumer is created here; nothing is sent until {@link
   * #start()}.
   *
   * @param dataSource the PostgreSQL pool that holds the ownership table and the handler's state
   */
  public static <K, V> PartitionOwner<K, V> create(
      DataSource dataSource,
      OwnershipConfig config,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      RecordHandler<K, V> handler) {
    return new PartitionOwner<>(
        dataSource,
        config,
        keyDeserializer,
        valueDeserializer,
        handler,
        Safeguards.ALL,
        OwnerEvents.NONE);
  }

  /** For tests: safeguards switched off, and hooks. Not public on purpose. */
  static <K, V> PartitionOwner<K, V> withSafeguards(
      DataSource dataSource,
      OwnershipConfig config,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer,
      RecordHandler<K, V> handler,
      Safeguards safeguards,
      OwnerEvents events) {
    return new PartitionOwner<>(
        dataSource, config, keyDeserializer, valueDeserializer, handler, safeguards, events);
  }

  private static Map<String, Object> consumerProperties(OwnershipConfig config) {
    Map<String, Object> props = new HashMap<>();
    props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    props.putAll(config.consumerProperties());
    props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
    props.put(ConsumerConfig.GROUP_ID_CONFIG, config.groupId());
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "none");
    props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, config.maxPollRecords());
    props.put(
        ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, (int) config.maxPollInterval().toMillis());
    if (!config.usesConsumerGroupProtocol()) {
      props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, (int) config.sessionTimeout().toMillis());
      props.put(
          ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG,
          (int) Math.max(1, config.sessionTimeout().toMillis() / 3));
      // Only the partitions that move are revoked, so only they get a new epoch.
      props.putIfAbsent(
          ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
          CooperativeStickyAssignor.class.getName());
    }
    return props;
  }

  /**
   * The dead-letter producer: idempotent with {@code acks=all}, so an acknowledged record is
   * replicated and the producer's own retries write it once. The runner's thread waits for each
   * send, so its waits default to the session timeout: {@code max.block.ms} (metadata, e.g. a
   * missing topic) and {@code delivery.timeout.ms} (the acknowledgement).
   */
  private static Map<String, Object> deadLetterProducerProperties(OwnershipConfig config) {
    Map<String, Object> props = new HashMap<>(config.deadLetterProducerProperties());
    int wait = (int) config.sessionTimeout().toMillis();
    props.putIfAbsent(ProducerConfig.MAX_BLOCK_MS_CONFIG, wait);
    props.putIfAbsent(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, wait);
    props.putIfAbsent(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, wait);
    props.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, 0); // one record, waited for: no batch
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, config.bootstrapServers());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    return props;
  }

  /**
   * Creates the ownership table if it does not exist (see the README's Schema); the schema of a
   * qualified name must exist. An existing table is left as it is, and checked. Each statement is
   * bounded by the config's query timeout.
   *
   * @throws dev.nolock.patterns.SchemaMismatchException when the table exists in a shape the runner
   *     cannot use: a column it reads or writes missing or of another type, {@code owner} or {@code
   *     claimed_at} {@code NOT NULL}, or no primary key on {@code (consumer_group, topic,
   *     partition)}; its message holds the DDL that fits
   * @throws BackendUnavailableException when PostgreSQL failed in a way a retry can fix
   *     (unreachable, a timeout, a read-only server during a failover; the shared {@code SqlErrors}
   *     policy): whether the table was created is unknown; call it again
   * @throws IllegalStateException when PostgreSQL refused the DDL in a way a retry repeats (no
   *     CREATE privilege on the schema, a missing schema), with its message and SQLState
   */
  public void createTableIfMissing() {
    SqlErrors.run(
        () ->
            "creating the ownership table "
                + config.table()
                + " (CREATE TABLE IF NOT EXISTS, then a check of its shape; the user needs CREATE"
                + " on the schema unless the table exists). Calling it again is harmless",
        () -> {
          new OwnerTable(config.tableName())
              .createTableIfMissing(dsl, config.table(), config.queryTimeout());
          return null;
        });
  }

  /**
   * Starts the loop on a thread of its own: it records (or checks) the partition count, joins the
   * group and applies. Returns at once.
   *
   * @throws IllegalStateException when called twice or after {@link #close()}
   */
  public PartitionOwner<K, V> start() {
    synchronized (lifecycle) {
      if (closed) {
        throw new IllegalStateException("This runner is closed; create a new one.");
      }
      if (thread != null) {
        throw new IllegalStateException("This runner was started already.");
      }
      thread =
          new Thread(this::runLoop, "nolock-owner-" + config.groupId() + "-" + config.ownerId());
      thread.start();
      return this;
    }
  }

  private void runLoop() {
    try {
      loop.run();
    } catch (Throwable e) {
      failure = e;
      // Without the exception: its causes' messages and stack trace (the handler's) quote the
      // record; failure() has it all.
      log.error(
          "Owner {} of group {} on {} stopped (failure() has the exception): {}",
          config.ownerId(),
          config.groupId(),
          config.topic(),
          StopReason.describe(e));
    }
  }

  /** The partitions this instance owns now, with their epochs. */
  public Map<Integer, FencingToken> ownedPartitions() {
    return loop.ownedPartitions();
  }

  /** True from {@link #start()} until the loop has stopped (closed or failed). */
  public boolean isRunning() {
    Thread t;
    synchronized (lifecycle) {
      t = thread;
    }
    return t != null && t.isAlive();
  }

  /**
   * Why the loop stopped, if it stopped on its own: {@link PartitionCountChangedException}, the
   * handler's or a deserializer's exception (in an {@link IllegalStateException} naming the record;
   * without a dead-letter topic), a send to the dead-letter topic that failed in a way a retry
   * would repeat, a non-transient database error, or a Kafka error. The runner's ERROR line names
   * it without the messages of its causes (the handler's exception names only its class), which
   * quote the records; this is the whole exception.
   */
  public Option<Throwable> failure() {
    return Option.of(failure);
  }

  /** Waits until the loop has stopped; true if it has. */
  public boolean awaitTermination(Duration timeout) throws InterruptedException {
    Thread t;
    synchronized (lifecycle) {
      t = thread;
    }
    if (t == null) {
      return true;
    }
    t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(timeout.toNanos())));
    return !t.isAlive();
  }

  public OwnershipConfig config() {
    return config;
  }

  /**
   * Stops the loop: the record being applied finishes (or its transaction rolls back), positions
   * are committed to Kafka, the consumer leaves the group so the partitions move at once. Waits up
   * to the config's close timeout. Idempotent.
   */
  @Override
  public void close() {
    Thread t;
    synchronized (lifecycle) {
      closed = true;
      t = thread;
    }
    loop.requestClose();
    if (t == null) {
      loop.closeUnstarted(); // never started: nobody else will close the consumer
      return;
    }
    try {
      t.join(config.closeTimeout().toMillis() + 5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (t.isAlive()) {
      log.warn("Owner {} did not stop within {}", config.ownerId(), config.closeTimeout());
    }
  }

  @Override
  public String toString() {
    return "PartitionOwner[" + config + "]";
  }
}
