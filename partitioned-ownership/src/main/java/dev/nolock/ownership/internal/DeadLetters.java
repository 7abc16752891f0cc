package dev.nolock.ownership.internal;

import dev.nolock.patterns.ErrorDescriber;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.header.Headers;
import org.apache.kafka.common.header.internals.RecordHeaders;

/**
 * Sends records that failed for good to the dead-letter topic, one at a time, and waits for the
 * broker's acknowledgement before the caller records the offset: the producer is idempotent with
 * {@code acks=all}, so an acknowledged record is in the replicated log, and the producer's own
 * retries of one send do not write it twice.
 *
 * <p>What is sent: the record's key and value bytes as fetched (so a record no deserializer can
 * read survives whole), its headers, then the {@code nolock.dlt.*} headers below. No message of the
 * failure and no data beyond the record's own: the exception is named by its class names only.
 */
public final class DeadLetters {

  public static final String TOPIC_HEADER = "nolock.dlt.topic";
  public static final String PARTITION_HEADER = "nolock.dlt.partition";
  public static final String OFFSET_HEADER = "nolock.dlt.offset";
  public static final String STAGE_HEADER = "nolock.dlt.stage";
  public static final String EXCEPTION_HEADER = "nolock.dlt.exception";
  public static final String EXCEPTION_CHAIN_HEADER = "nolock.dlt.exception.chain";

  private final Producer<byte[], byte[]> producer;
  private final String topic;

  /** Completed by {@link #stopWaiting()}: a wait for an acknowledgement ends at once. */
  private final CompletableFuture<Void> closing = new CompletableFuture<>();

  /** The send failed or its outcome is unknown; the record must not be taken as handled. */
  public static final class SendFailedException extends KafkaException {
    private static final long serialVersionUID = 1L;
    private final boolean retriable;

    SendFailedException(String message, Throwable cause, boolean retriable) {
      super(message, cause);
      this.retriable = retriable;
    }

    /** Kafka says a retry may succeed (a timeout, a broker not ready, not enough replicas). */
    public boolean retriable() {
      return retriable;
    }
  }

  public DeadLetters(Producer<byte[], byte[]> producer, String topic) {
    this.producer = Objects.requireNonNull(producer, "producer");
    this.topic = Objects.requireNonNull(topic, "topic");
  }

  public String topic() {
    return topic;
  }

  /**
   * Sends {@code raw} with the headers that say why, and returns once the broker acknowledged it
   * within the caller's time:
   *
   * <ol>
   *   <li>{@code producer.send}, which may block up to {@code max.block.ms} (metadata, a full
   *       buffer).
   *   <li>{@code timeLeft} is asked again once it returns, so the block counts against the caller's
   *       time; none left: the outcome is unknown, and the send is reported as a retriable failure,
   *       never as acknowledged.
   *   <li>The acknowledgement is awaited at most that long (also bounded by {@code
   *       delivery.timeout.ms}), and no longer than until {@link #stopWaiting()}.
   * </ol>
   *
   * @param timeLeft the time the caller may still spend, asked after the send returned
   * @throws SendFailedException the send failed, or timed out ({@code max.block.ms}, {@code
   *     delivery.timeout.ms}, {@code timeLeft}): it may or may not be in the topic
   */
  public void send(
      ConsumerRecord<byte[], byte[]> raw,
      RecordFailedException failure,
      Supplier<Duration> timeLeft) {
    String where = raw.topic() + "-" + raw.partition() + "@" + raw.offset();
    Duration wait = Duration.ZERO;
    try {
      CompletableFuture<RecordMetadata> ack = new CompletableFuture<>();
      producer.send(
          record(topic, raw, failure),
          (metadata, failed) -> {
            if (failed != null) {
              ack.completeExceptionally(failed);
            } else {
              ack.complete(metadata);
            }
          });
      wait = timeLeft.get();
      if (wait.isNegative() || wait.isZero()) {
        throw new java.util.concurrent.TimeoutException("send() returned with no time left");
      }
      CompletableFuture.anyOf(ack, closing).get(wait.toNanos(), TimeUnit.NANOSECONDS);
      if (!ack.isDone()) {
        throw new SendFailedException(
            "The runner is closing: sending "
                + where
                + " to the dead-letter topic "
                + topic
                + " was not acknowledged yet; it is not recorded as applied, and may or may not be"
                + " in "
                + topic,
            null,
            true);
      }
    } catch (java.util.concurrent.TimeoutException e) {
      throw new SendFailedException(
          "Sending "
              + where
              + " to the dead-letter topic "
              + topic
              + " was not acknowledged within "
              + Math.max(0, wait.toMillis())
              + " ms (the runner's deadline, after send() returned); it is not recorded as applied,"
              + " and may or may not be in "
              + topic,
          e,
          true);
    } catch (ExecutionException e) {
      Throwable why = e.getCause() == null ? e : e.getCause();
      throw failed(where, why);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptException(e);
    } catch (InterruptException | SendFailedException e) {
      throw e;
    } catch (KafkaException e) {
      throw failed(where, e);
    }
  }

  /**
   * What goes to {@code deadLetterTopic} for {@code raw}: its key, value and headers, then the
   * {@code nolock.dlt.*} headers naming where it came from and the failure's classes.
   */
  public static ProducerRecord<byte[], byte[]> record(
      String deadLetterTopic, ConsumerRecord<byte[], byte[]> raw, RecordFailedException failure) {
    Throwable cause = failure.getCause() == null ? failure : failure.getCause();
    if (cause instanceof RecordDeserializationException && cause.getCause() != null) {
      cause = cause.getCause(); // the deserializer's own exception, inside Kafka's wrapper
    }
    Headers headers = new RecordHeaders(raw.headers().toArray());
    add(headers, TOPIC_HEADER, raw.topic());
    add(headers, PARTITION_HEADER, Integer.toString(raw.partition()));
    add(headers, OFFSET_HEADER, Long.toString(raw.offset()));
    add(headers, STAGE_HEADER, failure.stage().header());
    add(headers, EXCEPTION_HEADER, cause.getClass().getName());
    add(
        headers,
        EXCEPTION_CHAIN_HEADER,
        ErrorDescriber.describe(ErrorDescriber.classNames(), cause));
    return new ProducerRecord<>(deadLetterTopic, null, null, raw.key(), raw.value(), headers);
  }

  private SendFailedException failed(String where, Throwable why) {
    return new SendFailedException(
        "Sending "
            + where
            + " to the dead-letter topic "
            + topic
            + " failed ("
            + why.getClass().getName()
            + "); it is not recorded as applied, and may or may not be in "
            + topic,
        why,
        why instanceof RetriableException);
  }

  private static void add(Headers headers, String name, String value) {
    headers.add(name, value.getBytes(StandardCharsets.UTF_8));
  }

  /**
   * Ends every wait for an acknowledgement, now and later, as not acknowledged: the runner is
   * closing, and its close must not wait for the broker beyond its own timeout.
   */
  public void stopWaiting() {
    closing.complete(null);
  }

  /**
   * Closes the producer, delivering for at most {@code atMost} a send still pending: one whose wait
   * was cut at the runner's deadline. Such a record was not recorded as applied, so the next
   * attempt sends it again whether or not this delivery happens: delivered, it is a duplicate (dead
   * letters are at least once); dropped, nothing is lost. The bound keeps a broker that is down
   * from holding the runner's thread.
   *
   * @param atMost what is left of the runner's close timeout
   */
  public void close(Duration atMost) {
    producer.close(atMost);
  }
}
