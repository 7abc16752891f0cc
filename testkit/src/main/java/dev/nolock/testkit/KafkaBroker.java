package dev.nolock.testkit;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;

/**
 * The real Kafka broker as one test class sees it, made by {@link KafkaExtension}.
 *
 * <p>Guarantees: {@link #uniqueTopicName(String)} never returns a name another test class (or
 * another call) gets, so classes that share the broker do not read each other's records; {@link
 * #createTopic(String, int)} returns only when every partition of the topic has a leader, so the
 * first {@code send} does not race the topic's creation. Topics are not deleted after the class:
 * the broker's data directory belongs to {@code scripts/services}.
 */
public final class KafkaBroker {

  /** How long {@link #createTopic(String, int)} waits for the topic and its leaders. */
  public static final Duration TOPIC_READY_TIMEOUT = Duration.ofSeconds(30);

  private static final Pattern LEGAL_TOPIC_PREFIX = Pattern.compile("[a-zA-Z0-9._-]{1,180}");

  private final String bootstrapServers;
  private final Admin admin;
  private final String classToken;
  private final AtomicInteger topics = new AtomicInteger();

  KafkaBroker(String bootstrapServers, Admin admin, String classToken) {
    this.bootstrapServers = bootstrapServers;
    this.admin = admin;
    this.classToken = classToken;
  }

  /** The {@code bootstrap.servers} value for producers and consumers. */
  public String bootstrapServers() {
    return bootstrapServers;
  }

  /** An admin client shared by the test class; the extension closes it after the class. */
  public Admin admin() {
    return admin;
  }

  /**
   * {@code prefix-<12 hex digits of this class>-<n>}, with {@code n} counting up per call.
   *
   * @param prefix letters, digits, {@code .}, {@code _} or {@code -}, at most 180 of them
   */
  public String uniqueTopicName(String prefix) {
    if (prefix == null || !LEGAL_TOPIC_PREFIX.matcher(prefix).matches()) {
      throw new IllegalArgumentException(
          "topic prefix '" + prefix + "' must be 1..180 of [a-zA-Z0-9._-], like \"orders\"");
    }
    return prefix + "-" + classToken + "-" + topics.incrementAndGet();
  }

  /**
   * Creates {@code name} with {@code partitions} partitions and the broker's default replication
   * factor, and waits until every partition has a leader.
   *
   * @return {@code name}, for chaining with {@link #uniqueTopicName(String)}
   * @throws IllegalArgumentException if {@code partitions < 1}
   * @throws IllegalStateException if the topic exists already, or is not ready within {@link
   *     #TOPIC_READY_TIMEOUT}
   */
  public String createTopic(String name, int partitions) {
    if (partitions < 1) {
      throw new IllegalArgumentException("partitions must be at least 1 but was " + partitions);
    }
    long deadline = System.nanoTime() + TOPIC_READY_TIMEOUT.toNanos();
    NewTopic topic = new NewTopic(name, Optional.of(partitions), Optional.empty());
    try {
      admin
          .createTopics(List.of(topic))
          .all()
          .get(TOPIC_READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof TopicExistsException) {
        throw new IllegalStateException(
            "topic '"
                + name
                + "' exists already; take a fresh name from"
                + " uniqueTopicName(prefix)",
            e.getCause());
      }
      throw new IllegalStateException(
          "could not create topic '" + name + "': " + e.getCause(), e.getCause());
    } catch (TimeoutException e) {
      throw notReady(name, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while creating topic '" + name + "'", e);
    }
    awaitLeaders(name, partitions, deadline);
    return name;
  }

  /** The controller has committed the topic; brokers learn of it through metadata shortly after. */
  private void awaitLeaders(String name, int partitions, long deadline) {
    while (true) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        throw notReady(name, null);
      }
      try {
        Map<String, TopicDescription> described =
            admin.describeTopics(List.of(name)).allTopicNames().get(left, TimeUnit.NANOSECONDS);
        TopicDescription description = described.get(name);
        if (description != null
            && description.partitions().size() == partitions
            && description.partitions().stream()
                .allMatch(p -> p.leader() != null && !p.leader().isEmpty())) {
          return;
        }
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
          throw new IllegalStateException(
              "could not describe topic '" + name + "': " + e.getCause(), e.getCause());
        }
      } catch (TimeoutException e) {
        throw notReady(name, e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while waiting for topic '" + name + "'", e);
      }
      pause(name);
    }
  }

  private static void pause(String name) {
    try {
      // Metadata propagates in milliseconds; a short pause keeps this from spinning.
      TimeUnit.MILLISECONDS.sleep(50);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while waiting for topic '" + name + "'", e);
    }
  }

  private static IllegalStateException notReady(String name, Throwable cause) {
    return new IllegalStateException(
        "topic '"
            + name
            + "' had no leader for every partition after "
            + TOPIC_READY_TIMEOUT.toSeconds()
            + " s; check the broker with: scripts/services status",
        cause);
  }

  @Override
  public String toString() {
    return "KafkaBroker[" + bootstrapServers + "]";
  }
}
