package dev.nolock.benchmarks;

import dev.nolock.ownership.OwnershipConfig;
import dev.nolock.ownership.PartitionOwner;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Throughput of "apply a command" under single-writer Kafka partitions: commands that increment a
 * per-key counter, already in a 4-partition topic, applied by two consumers of one group (the
 * partitions split between them, as a user runs it), each command in one PostgreSQL transaction
 * that also records the partition's last applied offset.
 *
 * <p>Each variant runs on its own topic, consumer group and schema:
 *
 * <ol>
 *   <li>create a topic with {@value #PARTITIONS} partitions; produce {@link
 *       Profile#ownershipCommands()} commands over {@value #KEYS} keys (key {@code "k" + i}, value
 *       {@code "1"}, the increment) with the default partitioner (the partition {@code KeyRouter}
 *       picks), and flush: producing is not measured;
 *   <li>create two consumers, note the start time, start them;
 *   <li>wait (a latch, with a deadline proportional to the command count) until every command has
 *       been applied. Each variant counts a command right after its counter statement, before its
 *       commit, so both variants count at the same point; the window runs from the first apply to
 *       the last, and {@code rebalanceMs} in the detail is the start to the first apply (joining
 *       the group, the assignment, and the library's claims); {@code consumerCpuUsPerCommand} is
 *       the CPU time of the applying threads from their first apply to the end, per command (the
 *       client-side cost; Kafka's network threads and the database server are not in it);
 *   <li>check that the counters sum to the command count (a variant that lost or duplicated a
 *       command throws instead of reporting a rate); close the consumers, delete the topic, drop
 *       the schema.
 * </ol>
 *
 * <p>Variants:
 *
 * <ul>
 *   <li>{@code ownershipPartitionOwner}: two nolock {@link PartitionOwner}s (one loop thread each)
 *       with the default config; the handler runs {@value #UPSERT} on the transaction the library
 *       gives it. Per record the library sends, in one transaction: its ownership {@code UPDATE
 *       nolock_partition_owners SET last_applied_offset = ? WHERE consumer_group = ? AND topic = ?
 *       AND partition = ? AND epoch = ? AND owner = ? AND last_applied_offset < ? AND
 *       set_config('statement_timeout', ?, true) IS NOT NULL AND
 *       set_config('idle_in_transaction_session_timeout', ?, true) IS NOT NULL}, the handler's
 *       upsert, and the commit: three round trips (pgjdbc sends {@code BEGIN} with the first
 *       statement). It commits offsets to Kafka asynchronously every 5 s (for lag tools only).
 *   <li>{@code ownershipRawConsumer}: the floor. Two plain {@link KafkaConsumer}s in the same group
 *       shape (the same cooperative sticky assignor, {@code read_committed}, 100 records per poll,
 *       500 ms poll timeout, 10 s session, manual commits), each record applied through plain JDBC
 *       on a connection from the same kind of pool, in one transaction: {@value #RAW_ADVANCE}, then
 *       the same {@value #UPSERT}, then the commit: the same three round trips. {@code commitAsync}
 *       of the applied positions every 5 s, as the library commits them, and {@code commitSync} of
 *       a partition's position when it is revoked (in the rebalance listener), the usual
 *       plain-consumer pattern, without which a moved partition would be applied twice. Its
 *       positions come from Kafka's committed offsets, with {@code auto.offset.reset=earliest}.
 * </ul>
 *
 * <p>What differs in the SQL, exactly: the floor's offset {@code UPDATE} hits the same row of a
 * table with the library's schema by its primary key, but without the fence, {@code AND epoch = ?
 * AND owner = ?}, without the forward-only {@code AND last_applied_offset < ?}, and without the two
 * {@code set_config} calls that bound the transaction's statement and idle time. The floor never
 * claims (no epoch bump per assigned partition) and does not read the table for its start position.
 * Everything else (one transaction per record, statement order, binds, pool, group shape) is the
 * same, so the ratio is the cost of nolock's fence, its transaction bounds and its loop (jOOQ
 * rendering, the point-of-no-return check, metrics).
 */
public final class OwnershipHarness implements Harness {

  static final int PARTITIONS = 4;
  static final int KEYS = 1_000;
  static final int CONSUMERS = 2;

  static final String UPSERT =
      "INSERT INTO counters (key, value) VALUES (?, ?) ON CONFLICT (key)"
          + " DO UPDATE SET value = counters.value + excluded.value";

  static final String RAW_ADVANCE =
      "UPDATE nolock_partition_owners SET last_applied_offset = ?"
          + " WHERE consumer_group = ? AND topic = ? AND partition = ?";

  /** The README's schema for the ownership table, so the floor updates an identical row. */
  private static final String OWNERSHIP_DDL =
      "CREATE TABLE nolock_partition_owners ("
          + " consumer_group varchar(255) NOT NULL, topic varchar(249) NOT NULL,"
          + " partition int NOT NULL CHECK (partition >= 0),"
          + " partition_count int NOT NULL CHECK (partition_count > partition),"
          + " epoch bigint NOT NULL CHECK (epoch >= 0), owner varchar(255),"
          + " last_applied_offset bigint NOT NULL CHECK (last_applied_offset >= -1),"
          + " claimed_at timestamptz, PRIMARY KEY (consumer_group, topic, partition))";

  private static final String COUNTERS_DDL =
      "CREATE TABLE counters (key text PRIMARY KEY, value bigint NOT NULL)";

  private static final Duration POLL = Duration.ofMillis(500);

  /** The library's default {@code commitInterval}, which the floor commits offsets on as well. */
  private static final Duration COMMIT_INTERVAL =
      OwnershipConfig.custom("127.0.0.1:9092", "t", "g").build().commitInterval();

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  @Override
  public String title() {
    return "Partitioned ownership: apply a command ("
        + CONSUMERS
        + " consumers, "
        + PARTITIONS
        + " partitions)";
  }

  @Override
  public List<HarnessResult> run(Profile profile, Consumer<String> progress) throws Exception {
    int commands = profile.ownershipCommands();
    List<HarnessResult> results = new ArrayList<>();
    results.add(partitionOwner(commands, progress));
    results.add(rawConsumer(commands, progress));
    return results;
  }

  private HarnessResult partitionOwner(int commands, Consumer<String> progress) throws Exception {
    String id = "ownershipPartitionOwner";
    try (Admin admin = admin();
        Bench.PgSchema schema = Bench.freshSchema(CONSUMERS)) {
      String topic = Bench.unique("bench_own");
      try {
        schema.execute(COUNTERS_DDL);
        prepareTopic(admin, topic, commands, id, progress);
        String group = "bench-" + topic;
        Run run = new Run(commands);
        List<PartitionOwner<String, String>> owners = new ArrayList<>();
        try {
          for (int i = 0; i < CONSUMERS; i++) {
            int owner = i;
            owners.add(
                PartitionOwner.create(
                    schema.dataSource(),
                    OwnershipConfig.custom(Bench.kafkaBootstrap(), topic, group)
                        .ownerId("bench-owner-" + i)
                        .build(),
                    new StringDeserializer(),
                    new StringDeserializer(),
                    (record, tx, epoch) -> {
                      tx.execute(UPSERT, record.key(), Long.parseLong(record.value()));
                      run.applied(owner);
                    }));
          }
          owners.get(0).createTableIfMissing();
          progress.accept(id + ": applying with " + CONSUMERS + " PartitionOwners");
          run.start();
          owners.forEach(PartitionOwner::start);
          run.await(
              () ->
                  owners.stream()
                      .map(o -> o.failure().getOrNull())
                      .filter(f -> f != null)
                      .findFirst()
                      .orElse(null));
        } finally {
          owners.forEach(PartitionOwner::close);
        }
        return run.result(id, schema.dataSource(), progress);
      } finally {
        deleteTopic(admin, topic, progress);
      }
    }
  }

  private HarnessResult rawConsumer(int commands, Consumer<String> progress) throws Exception {
    String id = "ownershipRawConsumer";
    try (Admin admin = admin();
        Bench.PgSchema schema = Bench.freshSchema(CONSUMERS)) {
      String topic = Bench.unique("bench_own");
      try {
        schema.execute(COUNTERS_DDL);
        schema.execute(OWNERSHIP_DDL);
        String group = "bench-" + topic;
        schema.execute(
            "INSERT INTO nolock_partition_owners (consumer_group, topic, partition,"
                + " partition_count, epoch, last_applied_offset) SELECT '"
                + group
                + "', '"
                + topic
                + "', p, "
                + PARTITIONS
                + ", 0, -1 FROM generate_series(0, "
                + (PARTITIONS - 1)
                + ") p"); // names are ours: [a-z0-9_-] only
        prepareTopic(admin, topic, commands, id, progress);
        Run run = new Run(commands);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        List<RawConsumer> consumers = new ArrayList<>();
        List<Thread> threads = new ArrayList<>();
        try {
          for (int i = 0; i < CONSUMERS; i++) {
            RawConsumer consumer =
                new RawConsumer(i, topic, group, schema.dataSource(), run, failure);
            consumers.add(consumer);
            threads.add(new Thread(consumer, "bench-raw-consumer-" + i));
          }
          progress.accept(id + ": applying with " + CONSUMERS + " KafkaConsumers");
          run.start();
          threads.forEach(Thread::start);
          run.await(failure::get);
        } finally {
          consumers.forEach(RawConsumer::stop);
          for (Thread thread : threads) {
            thread.join(TimeUnit.SECONDS.toMillis(30));
          }
        }
        return run.result(id, schema.dataSource(), progress);
      } finally {
        deleteTopic(admin, topic, progress);
      }
    }
  }

  /** One plain consumer's loop: the floor. */
  private static final class RawConsumer implements Runnable {

    private final int index;
    private final String topic;
    private final String group;
    private final DataSource dataSource;
    private final Run run;
    private final AtomicReference<Throwable> failure;
    private final KafkaConsumer<String, String> consumer;
    private final Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
    private long lastCommitNanos = System.nanoTime();
    private volatile boolean stopping;

    RawConsumer(
        int index,
        String topic,
        String group,
        DataSource dataSource,
        Run run,
        AtomicReference<Throwable> failure) {
      this.index = index;
      this.topic = topic;
      this.group = group;
      this.dataSource = dataSource;
      this.run = run;
      this.failure = failure;
      Properties props = new Properties();
      props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, Bench.kafkaBootstrap());
      props.put(ConsumerConfig.GROUP_ID_CONFIG, group);
      props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
      props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
      // The library's consumer settings, so both sides fetch and rebalance alike.
      props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
      props.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 100);
      props.put(ConsumerConfig.MAX_POLL_INTERVAL_MS_CONFIG, 60_000);
      props.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, 10_000);
      props.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, 10_000 / 3);
      props.put(
          ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG,
          CooperativeStickyAssignor.class.getName());
      this.consumer =
          new KafkaConsumer<>(props, new StringDeserializer(), new StringDeserializer());
    }

    @Override
    public void run() {
      try {
        consumer.subscribe(List.of(topic), new CommitOnRevoke());
        while (!stopping) {
          ConsumerRecords<String, String> records = consumer.poll(POLL);
          for (ConsumerRecord<String, String> record : records) {
            apply(record);
            pending.put(
                new TopicPartition(record.topic(), record.partition()),
                new OffsetAndMetadata(record.offset() + 1));
          }
          long now = System.nanoTime();
          if (!pending.isEmpty() && now - lastCommitNanos >= COMMIT_INTERVAL.toNanos()) {
            // Kept after the commit too: a commit refused because a rebalance is under way is
            // made again at the next interval or when the partitions are revoked, and committing
            // a position twice is harmless.
            consumer.commitAsync(new HashMap<>(pending), null);
            lastCommitNanos = now;
          }
        }
      } catch (WakeupException e) {
        if (!stopping) {
          failure.compareAndSet(null, e);
        }
      } catch (Throwable e) {
        failure.compareAndSet(null, e);
      } finally {
        consumer.close();
      }
    }

    /**
     * The usual plain-consumer pattern: a partition that moves takes its applied positions along,
     * or its new owner would apply them again (the floor does not read the table on assignment).
     */
    private final class CommitOnRevoke implements ConsumerRebalanceListener {

      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
        Map<TopicPartition, OffsetAndMetadata> revoked = new HashMap<>();
        for (TopicPartition tp : partitions) {
          OffsetAndMetadata offset = pending.remove(tp);
          if (offset != null) {
            revoked.put(tp, offset);
          }
        }
        if (!revoked.isEmpty()) {
          consumer.commitSync(revoked);
        }
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}

      @Override
      public void onPartitionsLost(Collection<TopicPartition> partitions) {
        // Someone else may own them already; a replay would show in the final counter check.
        partitions.forEach(pending::remove);
      }
    }

    /** What jOOQ's transaction does around the library's statements, minus the fence. */
    private void apply(ConsumerRecord<String, String> record) throws SQLException {
      try (Connection connection = dataSource.getConnection()) {
        connection.setAutoCommit(false);
        try {
          try (PreparedStatement advance = connection.prepareStatement(RAW_ADVANCE)) {
            advance.setLong(1, record.offset());
            advance.setString(2, group);
            advance.setString(3, record.topic());
            advance.setInt(4, record.partition());
            if (advance.executeUpdate() != 1) {
              throw new IllegalStateException("no ownership row for " + record.partition());
            }
          }
          try (PreparedStatement upsert = connection.prepareStatement(UPSERT)) {
            upsert.setString(1, record.key());
            upsert.setLong(2, Long.parseLong(record.value()));
            upsert.executeUpdate();
          }
          run.applied(index);
          connection.commit();
        } catch (SQLException | RuntimeException e) {
          connection.rollback();
          throw e;
        } finally {
          connection.setAutoCommit(true);
        }
      }
    }

    void stop() {
      stopping = true;
      consumer.wakeup();
    }
  }

  /** Counts applies, times the window, and checks the counters at the end. */
  private static final class Run {

    private final int commands;
    private final CountDownLatch done;
    private final AtomicLong firstApply = new AtomicLong();
    private final AtomicLong lastApply = new AtomicLong();
    private final AtomicLongArray perConsumer = new AtomicLongArray(CONSUMERS);
    private final AtomicLongArray firstPerConsumer = new AtomicLongArray(CONSUMERS);
    private final AtomicLongArray threadPerConsumer = new AtomicLongArray(CONSUMERS);
    private final AtomicLongArray cpuAtFirst = new AtomicLongArray(CONSUMERS);
    private final long[] cpuAtEnd = new long[CONSUMERS];
    private final AtomicLong allApplyingAt = new AtomicLong();
    private final AtomicLong appliedBeforeAllApplying = new AtomicLong();
    private long startNanos;

    Run(int commands) {
      this.commands = commands;
      this.done = new CountDownLatch(commands);
    }

    void start() {
      startNanos = System.nanoTime();
    }

    void applied(int consumer) {
      long now = System.nanoTime();
      firstApply.compareAndSet(0, now);
      if (firstPerConsumer.compareAndSet(consumer, 0, now)) {
        // Once per consumer: its thread's CPU from here to the end is what applying cost it.
        threadPerConsumer.set(consumer, Thread.currentThread().getId());
        cpuAtFirst.set(consumer, THREADS.getCurrentThreadCpuTime());
        boolean all = true;
        for (int i = 0; i < CONSUMERS; i++) {
          all &= firstPerConsumer.get(i) != 0;
        }
        if (all && allApplyingAt.compareAndSet(0, now)) {
          appliedBeforeAllApplying.set(commands - done.getCount());
        }
      }
      perConsumer.incrementAndGet(consumer);
      lastApply.accumulateAndGet(now, Math::max);
      done.countDown();
    }

    /**
     * Waits for every command; a failed consumer or the deadline ends the run with an error. Reads
     * the consumer threads' CPU time at the end, while they are still alive.
     */
    void await(Supplier<Throwable> failure) throws InterruptedException {
      // Far below any plausible rate (100 commands/s), so only a stuck run reaches it.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60 + commands / 100);
      while (!done.await(100, TimeUnit.MILLISECONDS)) {
        Throwable failed = failure.get();
        if (failed != null) {
          throw new IllegalStateException("a consumer failed: " + failed, failed);
        }
        if (System.nanoTime() - deadline > 0) {
          throw new IllegalStateException(
              (commands - done.getCount())
                  + " of "
                  + commands
                  + " commands applied by the deadline");
        }
      }
      for (int i = 0; i < CONSUMERS; i++) {
        long thread = threadPerConsumer.get(i);
        cpuAtEnd[i] = thread == 0 ? -1 : THREADS.getThreadCpuTime(thread);
      }
    }

    HarnessResult result(String id, DataSource dataSource, Consumer<String> progress)
        throws SQLException {
      long sum = counterSum(dataSource);
      if (sum != commands) {
        throw new IllegalStateException(
            id
                + ": the counters sum to "
                + sum
                + ", not "
                + commands
                + ": commands were lost or"
                + " applied twice; no rate reported");
      }
      // The rate while every consumer applies: a rebalance that leaves one consumer idle for
      // seconds (it happens to either variant, at random) would otherwise decide the ratio.
      long from = allApplyingAt.get();
      long remaining = commands - appliedBeforeAllApplying.get();
      boolean steady = from != 0 && remaining >= commands / 4;
      long windowNanos = Math.max(1, lastApply.get() - (steady ? from : firstApply.get()));
      double perSecond = (steady ? remaining : commands - 1) * 1e9 / windowNanos;
      Map<String, String> detail = new LinkedHashMap<>();
      detail.put(
          "rateOver",
          steady
              ? "all " + CONSUMERS + " consumers applying (" + remaining + " commands)"
              : "the whole run (a consumer started late)");
      detail.put("commands", Integer.toString(commands));
      detail.put("rebalanceMs", Long.toString(millis(firstApply.get() - startNanos)));
      detail.put("windowMs", Long.toString(millis(windowNanos)));
      long cpuNanos = 0;
      for (int i = 0; i < CONSUMERS; i++) {
        if (cpuAtEnd[i] > 0 && cpuAtFirst.get(i) >= 0) {
          cpuNanos += cpuAtEnd[i] - cpuAtFirst.get(i);
        }
      }
      // Client-side cost per command on the applying threads (Kafka's network thread excluded).
      detail.put("consumerCpuUsPerCommand", String.format("%.1f", cpuNanos / 1e3 / commands));
      for (int i = 0; i < CONSUMERS; i++) {
        detail.put("consumer" + i + "Applied", Long.toString(perConsumer.get(i)));
        long first = firstPerConsumer.get(i);
        detail.put(
            "consumer" + i + "FirstApplyMs",
            first == 0 ? "-" : Long.toString(millis(first - startNanos)));
      }
      progress.accept(String.format("%s: %.0f commands/s %s", id, perSecond, detail));
      return new HarnessResult(id, CONSUMERS, perSecond, detail);
    }

    /**
     * The counters once the last commit is visible: the count is taken before each commit, so the
     * last commit may still be in flight when the latch opens.
     */
    private long counterSum(DataSource dataSource) throws SQLException {
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
      long sum;
      do {
        try (Connection connection = dataSource.getConnection();
            Statement statement = connection.createStatement();
            ResultSet rows =
                statement.executeQuery("SELECT coalesce(sum(value), 0) FROM counters")) {
          rows.next();
          sum = rows.getLong(1);
        }
      } while (sum < commands && System.nanoTime() - deadline < 0);
      return sum;
    }

    private static long millis(long nanos) {
      return TimeUnit.NANOSECONDS.toMillis(nanos);
    }
  }

  private static Admin admin() {
    Properties props = new Properties();
    props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, Bench.kafkaBootstrap());
    return Admin.create(props);
  }

  private static void prepareTopic(
      Admin admin, String topic, int commands, String id, Consumer<String> progress)
      throws Exception {
    admin
        .createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 1)))
        .all()
        .get(30, TimeUnit.SECONDS);
    progress.accept(id + ": producing " + commands + " commands to " + topic);
    Properties props = new Properties();
    props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, Bench.kafkaBootstrap());
    props.put(ProducerConfig.ACKS_CONFIG, "all");
    props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
    props.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    AtomicReference<Exception> failed = new AtomicReference<>();
    try (KafkaProducer<String, String> producer =
        new KafkaProducer<>(props, new StringSerializer(), new StringSerializer())) {
      for (int i = 0; i < commands; i++) {
        producer.send(
            new ProducerRecord<>(topic, "k" + (i % KEYS), "1"),
            (metadata, e) -> {
              if (e != null) {
                failed.compareAndSet(null, e);
              }
            });
      }
      producer.flush();
    }
    if (failed.get() != null) {
      throw new IllegalStateException("a command was not acknowledged", failed.get());
    }
  }

  private static void deleteTopic(Admin admin, String topic, Consumer<String> progress) {
    try {
      admin.deleteTopics(List.of(topic)).all().get(30, TimeUnit.SECONDS);
    } catch (Exception e) {
      // Reported, not thrown: a leftover topic costs disk, never a wrong figure.
      progress.accept("could not delete topic " + topic + ": " + e);
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
