package dev.nolock.spring;

import dev.nolock.queue.JobQueue;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import javax.sql.DataSource;

/**
 * The application's skip-locked queues, one {@link JobQueue} per queue name, all on the
 * application's {@code DataSource} with connections of their own (never the caller's transaction;
 * pass {@link NolockTransactions#current()} to {@code enqueue} and {@code complete} to join it).
 *
 * <pre>{@code
 * JobQueue<Receipt> receipts = jobQueues.queue("receipts", Receipt.class);
 * receipts.enqueue(nolockTransactions.current(), NewJob.of(receipt)); // commits with the caller
 * }</pre>
 *
 * <p>Guarantee: one queue name has one payload type and one codec, for every caller and handler in
 * the application, so a job is decoded with the codec it was encoded with.
 *
 * <ol>
 *   <li>{@link #queue} validates the name and the type, and returns the queue made for that name
 *       before when its type is the same; another type is refused.
 *   <li>Otherwise it makes the queue with the settings for the name ({@code
 *       nolock.queue.queues.<name>.*}) and the codec for the type, creates its table when the
 *       application asked for it ({@code nolock.create-tables}), once per table, and keeps it.
 * </ol>
 *
 * Thread-safe.
 */
public final class JobQueues {

  /** The codec for a payload type. */
  @FunctionalInterface
  public interface Codecs {

    /**
     * The codec storing {@code type}'s payloads of the queue {@code queue}.
     *
     * @throws IllegalArgumentException when {@code type} cannot be stored; the message says how
     */
    <T> PayloadCodec<T> forType(String queue, Class<T> type);
  }

  private record Made(Class<?> type, JobQueue<?> queue) {}

  private final DataSource dataSource;
  private final Function<String, QueueConfig> configs;
  private final Codecs codecs;
  private final boolean createTables;
  private final Map<String, Made> queues = new ConcurrentHashMap<>();
  private final Set<String> tables = ConcurrentHashMap.newKeySet();

  /**
   * @param dataSource connections for the queues' own transactions; not a {@code
   *     TransactionAwareDataSourceProxy} (see {@code OwnConnections})
   * @param configs the settings of the queue with the given name; throws {@link
   *     IllegalArgumentException} for an invalid name
   * @param codecs the codec per payload type
   * @param createTables whether to call {@link JobQueue#createTableIfMissing()} once per table
   */
  public JobQueues(
      DataSource dataSource,
      Function<String, QueueConfig> configs,
      Codecs codecs,
      boolean createTables) {
    this.dataSource = Objects.requireNonNull(dataSource, "dataSource");
    this.configs = Objects.requireNonNull(configs, "configs");
    this.codecs = Objects.requireNonNull(codecs, "codecs");
    this.createTables = createTables;
  }

  /**
   * The queue named {@code name} whose payloads are {@code payloadType}.
   *
   * @throws IllegalArgumentException when the name is invalid, when the type cannot be stored, or
   *     when the queue was asked for before with another payload type
   */
  public <T> JobQueue<T> queue(String name, Class<T> payloadType) {
    if (payloadType == null) {
      throw new IllegalArgumentException(
          "The payload type is null: pass the class of the queue's payloads, e.g. String.class.");
    }
    if (name == null) {
      throw new IllegalArgumentException("The queue name is null: pass the queue's name.");
    }
    Made made = queues.computeIfAbsent(name, n -> new Made(payloadType, make(n, payloadType)));
    if (!made.type().equals(payloadType)) {
      throw new IllegalArgumentException(
          "The queue \""
              + name
              + "\" is used with payload type "
              + made.type().getName()
              + ", and was now asked for with "
              + payloadType.getName()
              + ": one queue stores one payload type (its codec decodes every job of the"
              + " queue). Use the same type everywhere, or another queue name.");
    }
    @SuppressWarnings("unchecked") // made for payloadType, checked just above
    JobQueue<T> queue = (JobQueue<T>) made.queue();
    return queue;
  }

  private <T> JobQueue<T> make(String name, Class<T> payloadType) {
    QueueConfig config = configs.apply(name);
    JobQueue<T> queue = JobQueue.create(dataSource, config, codecs.forType(name, payloadType));
    if (createTables && !tables.contains(config.table())) {
      queue.createTableIfMissing();
      tables.add(config.table());
    }
    return queue;
  }

  @Override
  public String toString() {
    return "JobQueues" + queues.keySet();
  }
}
