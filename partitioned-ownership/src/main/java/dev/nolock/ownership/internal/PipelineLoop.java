package dev.nolock.ownership.internal;

import dev.nolock.ownership.ExactlyOnceConfig;
import dev.nolock.ownership.Transform;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.RetryPolicy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.WakeupException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consume-transform-produce loop: per poll, one transaction with the outputs of every record
 * and the batch's next offsets ({@code sendOffsetsToTransaction} with the consumer's group
 * metadata, so a consumer that has lost its partitions cannot commit them).
 *
 * <p>Failures: a fence ({@link ProducerFencedException}) closes the producer and stops the loop for
 * good. On Kafka 4.x a fenced producer first sees {@code InvalidProducerEpochException}: the loop
 * aborts, and the abort throws {@link ProducerFencedException} if it was a fence. Anything else
 * that an abort can cure (a rebalance, a send or offset commit that timed out) aborts, rewinds the
 * batch and goes on after a backoff; a send the broker refuses for what was sent (a record too
 * large, an invalid topic, record or timestamp: {@link KafkaErrors#isPermanent}) aborts and stops
 * the loop, as the batch would fail alike again. An exception or {@link Error} of user code that
 * escapes aborts the transaction before the loop stops.
 *
 * <p>A {@code commitTransaction()} or {@code abortTransaction()} that times out ({@code
 * max.block.ms}) is different: the request may be completing on the broker, so Kafka accepts no
 * other call until one of the same completes ({@code abortTransaction()} after a timed-out commit
 * throws {@link IllegalStateException}). The loop calls it again, after a short backoff, until it
 * completes, fails otherwise (a fence, an abortable error: handled as above) or {@code
 * commitRetryTimeout} has passed since the first call, or the pipeline is closing; then it stops
 * with {@link BackendUnavailableException}: the transaction's outcome is unknown.
 *
 * <p>The clients carry bytes: the loop runs the deserializers and serializers itself, so that an
 * input record that fails for good (a deserializer or the transform throws) keeps its bytes. With a
 * dead-letter topic those bytes go there in the batch's transaction, with the input offsets, so the
 * record is dead-lettered exactly once for {@code read_committed} readers, and a transaction that
 * aborts takes its dead letters with it. Without one, the transaction is aborted and the loop
 * stops. A failure not known to be the record's ({@link RecordFailures}) is never dead-lettered:
 * with a dead-letter topic a transient one aborts (as {@link #recover} does), rewinds and backs
 * off; anything else stops the loop. {@code maxConsecutiveDeadLetters} dead letters in a row stop
 * it too.
 */
public final class PipelineLoop<KI, VI, KO, VO> {

  private static final Logger log = LoggerFactory.getLogger(PipelineLoop.class);

  /**
   * Between calls of a timed-out commit or abort (each call itself waits {@code max.block.ms}), and
   * before a batch whose transaction failed is tried again.
   */
  private static final RetryPolicy RETRY =
      RetryPolicy.custom().baseDelay(Duration.ofMillis(50)).maxDelay(Duration.ofSeconds(1)).build();

  private final ExactlyOnceConfig config;
  private final Consumer<byte[], byte[]> consumer;
  private final RecordDecoder<KI, VI> decoder;
  private final Producer<byte[], byte[]> producer;
  private final OutputSerializer<KO, VO> serializer;
  private final Transform<KI, VI, KO, VO> transform;
  private final PipelineMetrics metrics;
  private final AtomicBoolean closing = new AtomicBoolean();
  private final CountDownLatch closed = new CountDownLatch(1);

  /** Waits one backoff; true when {@link #requestClose()} came meanwhile. */
  interface Pause {
    boolean pause(Duration delay) throws InterruptedException;
  }

  private Pause pause = delay -> closed.await(delay.toMillis(), TimeUnit.MILLISECONDS);
  private int transientFailures;

  /** Input records dead-lettered since the last one transformed: the circuit breaker's count. */
  private int consecutiveDeadLetters;

  private volatile boolean fenced;
  private boolean producerClosed;

  public PipelineLoop(
      ExactlyOnceConfig config,
      Consumer<byte[], byte[]> consumer,
      RecordDecoder<KI, VI> decoder,
      Producer<byte[], byte[]> producer,
      OutputSerializer<KO, VO> serializer,
      Transform<KI, VI, KO, VO> transform,
      PipelineMetrics metrics) {
    this.config = config;
    this.consumer = consumer;
    this.decoder = decoder;
    this.producer = producer;
    this.serializer = serializer;
    this.transform = transform;
    this.metrics = metrics;
  }

  /**
   * Registers the transactional id: fences every older producer with it and aborts its open
   * transaction. Called before the loop starts, from the starting thread.
   */
  public void initTransactions() {
    try {
      producer.initTransactions();
    } catch (KafkaException e) {
      if (KafkaErrors.isFenced(e)) {
        fenced = true;
        metrics.fenced();
      }
      closeAll();
      throw e;
    }
  }

  /** True once this pipeline's producer was fenced by a newer one. */
  public boolean fenced() {
    return fenced;
  }

  /** Replaces the wait of each backoff, for tests that look at the waits; before {@link #run}. */
  void pauseWith(Pause pause) {
    this.pause = pause;
  }

  /** Closes the clients of a loop that never ran. */
  public void closeUnstarted() {
    closeAll();
  }

  public void requestClose() {
    closing.set(true);
    closed.countDown();
    consumer.wakeup();
  }

  /** Runs until {@link #requestClose()} or a fence or fatal error, which is thrown. */
  public void run() {
    try {
      consumer.subscribe(List.of(config.inputTopic()));
      while (!closing.get()) {
        ConsumerRecords<byte[], byte[]> records = consumer.poll(config.pollTimeout());
        if (!records.isEmpty()) {
          transact(records);
        }
      }
    } catch (WakeupException | InterruptException e) {
      if (!closing.get()) {
        throw e;
      }
    } finally {
      closeAll();
    }
  }

  private void transact(ConsumerRecords<byte[], byte[]> records) {
    int deadLetteredBefore = consecutiveDeadLetters;
    // Thrown after the try, so that a fence its abort reveals is not taken for the batch's.
    RuntimeException stop = null;
    try {
      // Inside the try: a fenced producer fails here, and recover() reports the fence.
      producer.beginTransaction();
      int deadLettered = 0;
      for (ConsumerRecord<byte[], byte[]> raw : records) {
        RecordFailedException failed;
        try {
          failed = transform(raw);
        } catch (RecordFailures.PredicateFailedException e) {
          stop = e; // aborted below, so no output of the batch stays open
          break;
        }
        if (failed == null) {
          consecutiveDeadLetters = 0;
          continue;
        }
        if (config.deadLetterTopic().isEmpty() || !failed.deadLetterable()) {
          stop = failed;
          break;
        }
        if (consecutiveDeadLetters >= config.maxConsecutiveDeadLetters()) {
          stop = breakerTripped(failed);
          break;
        }
        producer.send(DeadLetters.record(config.deadLetterTopic().get(), raw, failed));
        deadLettered++;
        consecutiveDeadLetters++;
        log.warn(
            "{} failed in its {}; sent to the dead-letter topic {} in the batch's transaction: {}",
            raw.topic() + "-" + raw.partition() + "@" + raw.offset(),
            failed.stage().header(),
            config.deadLetterTopic().get(),
            StopReason.describe(failed));
      }
      if (stop == null) {
        producer.sendOffsetsToTransaction(nextOffsets(records), consumer.groupMetadata());
        untilNoTimeout("commit", producer::commitTransaction);
        metrics.committed(records.count(), deadLettered);
        transientFailures = 0;
      }
    } catch (InterruptException e) {
      throw e; // not the transaction's failure: an interrupted commit must not be aborted either
    } catch (TransientRecordFailure e) {
      consecutiveDeadLetters = deadLetteredBefore;
      retryLater(e, records);
    } catch (KafkaException e) {
      consecutiveDeadLetters = deadLetteredBefore;
      recover(e, records);
    } catch (BackendUnavailableException e) {
      throw e; // a commit that kept timing out: it may be completing, so no abort (untilNoTimeout)
    } catch (RuntimeException e) {
      // User code's own (a partitioner's exception): abort first, or the batch's outputs stay in
      // an open transaction until transactionTimeout, stalling read_committed readers.
      throw abortToStop(e);
    } catch (Error e) {
      // A transform's StackOverflowError, a class missing at run time: the same, and rethrown.
      try {
        producer.abortTransaction();
        metrics.aborted();
      } catch (RuntimeException abortFailed) {
        e.addSuppressed(abortFailed);
      }
      throw e;
    }
    if (stop != null) {
      throw abortToStop(stop);
    }
  }

  /**
   * A record failed transiently ({@link RecordFailures.Verdict#RETRY}): abort, rewind and wait a
   * backoff before the batch is transformed again, so a registry or backend that is down is neither
   * dead-lettered against nor called in a hot loop. The abort is {@link #recover}'s: called again
   * while it times out, and a fence it reveals stops the loop as fenced.
   */
  private void retryLater(TransientRecordFailure e, ConsumerRecords<byte[], byte[]> records) {
    abort(e);
    rewind(records);
    backOff(e.getMessage(), e.getCause());
  }

  /**
   * Waits before the rewound batch is tried again, longer after each failure in a row, so that a
   * failure that repeats (a backend that is down, a dead letter the broker always refuses) is not
   * retried in a hot loop. Returns early on {@link #requestClose()}.
   */
  private void backOff(String what, Throwable cause) {
    transientFailures++;
    Duration delay = RETRY.backoff(transientFailures, ThreadLocalRandom.current());
    log.warn(
        "{}; transaction aborted, batch rewound, trying again in {} ms: {}",
        what,
        delay.toMillis(),
        ErrorDescriber.describe(ErrorDescriber.classNames(), cause));
    try {
      if (pause.pause(delay)) {
        return; // requestClose(): the loop ends at its next check
      }
    } catch (InterruptedException interrupted) {
      Thread.currentThread().interrupt();
      throw new InterruptException(interrupted);
    }
  }

  private IllegalStateException breakerTripped(RecordFailedException failed) {
    IllegalStateException stop =
        new IllegalStateException(
            "The pipeline dead-lettered "
                + consecutiveDeadLetters
                + " input records in a row (maxConsecutiveDeadLetters) and the next one failed too"
                + " ("
                + failed.getMessage()
                + "). So many failures in a row look systemic, not poison records: the"
                + " transaction was aborted and the pipeline stopped, as without a dead-letter"
                + " topic. Fix the cause and restart.",
            failed.getCause());
    stop.addSuppressed(failed);
    return stop;
  }

  /**
   * Deserializes {@code raw}, transforms it, serializes its outputs and sends them in the open
   * transaction.
   *
   * @return null when it did; the failure when a deserializer, the transform or a serializer threw
   *     (nothing of this record was sent)
   * @throws TransientRecordFailure that failure was transient ({@link RecordFailures}): the batch
   *     must be tried again after a backoff, the record never dead-lettered
   */
  private RecordFailedException transform(ConsumerRecord<byte[], byte[]> raw) {
    String where = raw.topic() + "-" + raw.partition() + "@" + raw.offset();
    RecordDecoder.Decoded<KI, VI> decoded = decoder.decode(raw);
    if (decoded.failure() != null) {
      boolean key =
          decoded.failure().origin()
              == RecordDeserializationException.DeserializationExceptionOrigin.KEY;
      return failed(
          key
              ? RecordFailedException.Stage.KEY_DESERIALIZER
              : RecordFailedException.Stage.VALUE_DESERIALIZER,
          where,
          "The "
              + (key ? "key" : "value")
              + " deserializer failed on "
              + where
              + "; the transaction was aborted and the pipeline stopped. Fix the deserializer",
          decoded.failure());
    }
    List<ProducerRecord<KO, VO>> outputs;
    try {
      outputs = transform.apply(decoded.record());
    } catch (Exception e) {
      return failed(
          RecordFailedException.Stage.TRANSFORM,
          where,
          "The transform failed on "
              + where
              + "; the transaction was aborted and the pipeline stopped. Fix the transform",
          e);
    }
    // All outputs are serialized before any is sent, so a record whose serializer fails has sent
    // nothing and can be dead-lettered whole.
    List<ProducerRecord<byte[], byte[]>> serialized = new ArrayList<>(outputs.size());
    try {
      for (ProducerRecord<KO, VO> output : outputs) {
        serialized.add(serializer.serialize(output));
      }
    } catch (RuntimeException e) {
      return failed(
          RecordFailedException.Stage.SERIALIZER,
          where,
          "A serializer failed on an output of "
              + where
              + "; the transaction was aborted and the pipeline stopped. Fix the serializer or the"
              + " transform",
          e);
    }
    for (ProducerRecord<byte[], byte[]> output : serialized) {
      producer.send(output);
    }
    return null;
  }

  /**
   * The record's failure in {@code stage}, as {@link RecordFailures} decides.
   *
   * @param what what failed and what to fix, e.g. "The transform failed on in-0@7; ... Fix the
   *     transform"
   */
  private RecordFailedException failed(
      RecordFailedException.Stage stage, String where, String what, Throwable cause) {
    RecordFailures.Verdict verdict =
        RecordFailures.classify(
            cause, stage, where, config.deadLetterTopic().isDefined(), config.deadLetterWhen());
    if (verdict == RecordFailures.Verdict.RETRY) {
      throw new TransientRecordFailure(
          "The " + stage.header() + " failed transiently on " + where, cause);
    }
    String fix =
        (config.deadLetterTopic().isDefined()
                ? ", or mark the exception with ExactlyOnceConfig's deadLetterWhen"
                : ", or set ExactlyOnceConfig's deadLetterTopic, with a deadLetterWhen that marks"
                    + " the exception,")
            + " if it means the input record is poison. nolock never dead-letters a failure the"
            + " predicate does not mark.";
    return new RecordFailedException(
        stage, what + fix, cause, verdict == RecordFailures.Verdict.DEAD_LETTER);
  }

  private void recover(KafkaException failure, ConsumerRecords<byte[], byte[]> records) {
    // Class names only: the failure can be a serializer's, whose message quotes the output.
    String failed = ErrorDescriber.describe(ErrorDescriber.classNames(), failure);
    log.info("Transaction of {} failed ({}); aborting it", config.transactionalId(), failed);
    if (KafkaErrors.isFenced(failure)) {
      throw fencedBy(failure);
    }
    if (KafkaErrors.isFatal(failure)) {
      throw failure;
    }
    // Abortable, or possibly fenced (InvalidProducerEpochException on Kafka 4.x): the abort
    // tells which.
    abort(failure);
    if (KafkaErrors.isPermanent(failure)) {
      // After the abort, so nothing of the batch stays open; trying again would fail the same way.
      throw failure;
    }
    rewind(records);
    backOff("Transaction of " + config.transactionalId() + " failed", failure);
  }

  /**
   * Calls {@code commitOrAbort} until it returns or throws anything but a {@link TimeoutException}.
   * Kafka caches the timed-out request and the call again waits for that same request: nothing is
   * sent twice, and the call does not decide anything new.
   *
   * @throws BackendUnavailableException when {@code commitRetryTimeout} has passed since the first
   *     call, or the pipeline is closing: the transaction's outcome is unknown
   */
  private void untilNoTimeout(String what, Runnable commitOrAbort) {
    long start = System.nanoTime();
    for (int timeouts = 1; ; timeouts++) {
      try {
        commitOrAbort.run();
        return;
      } catch (TimeoutException e) {
        metrics.commitTimedOut();
        Duration elapsed = Duration.ofNanos(System.nanoTime() - start);
        if (closing.get() || elapsed.compareTo(config.commitRetryTimeout()) >= 0) {
          throw outcomeUnknown(what, timeouts, elapsed, e);
        }
        Duration delay = RETRY.backoff(timeouts, ThreadLocalRandom.current());
        log.warn(
            "The {} of a transaction of {} timed out ({} in a row, {} ms so far); calling it again"
                + " in {} ms, as Kafka requires: {}",
            what,
            config.transactionalId(),
            timeouts,
            elapsed.toMillis(),
            delay.toMillis(),
            e.toString());
        try {
          // A sleep is right here: this thread owns the producer, and Kafka wants the very same
          // call again on it, so there is nothing else the thread could do meanwhile.
          Thread.sleep(delay.toMillis());
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw new InterruptException(interrupted);
        }
      }
    }
  }

  private BackendUnavailableException outcomeUnknown(
      String what, int timeouts, Duration elapsed, TimeoutException last) {
    String outcome =
        what.equals("commit")
            ? ": the transaction's outcome is unknown. The broker commits it if the commit reached"
                + " the transaction coordinator, and aborts it otherwise (at the latest after"
                + " transactionTimeout)."
            : ": the transaction did not commit; the broker aborts it (at the latest after"
                + " transactionTimeout).";
    String message =
        "The "
            + what
            + " of a transaction of "
            + config.transactionalId()
            + " timed out "
            + timeouts
            + " time(s) in "
            + elapsed.toMillis()
            + " ms"
            + (closing.get() ? " and the pipeline is closing" : " (commitRetryTimeout)")
            + outcome
            + " The pipeline stopped and closed its producer; start a new pipeline with the same"
            + " transactional.id: its start() completes or aborts that transaction first, and the"
            + " inputs of an aborted one are transformed again.";
    log.error(message);
    closeProducer();
    return new BackendUnavailableException(message, last);
  }

  private RuntimeException fencedBy(KafkaException e) {
    fenced = true;
    metrics.fenced();
    log.warn(
        "Producer {} was fenced by a newer producer with the same transactional.id; closing it"
            + " and stopping: {}",
        config.transactionalId(),
        e.toString());
    closeProducer();
    return e;
  }

  /**
   * Aborts the open transaction after {@code failure}, so that the batch can be tried again: the
   * abort is called again while it times out ({@link #untilNoTimeout}), as Kafka requires.
   *
   * @throws KafkaException the abort found a fence ({@link #fenced()} is then set) or left the
   *     producer in a fatal state, with {@code failure} suppressed
   */
  private void abort(RuntimeException failure) {
    try {
      untilNoTimeout("abort", producer::abortTransaction);
    } catch (KafkaException e) {
      e.addSuppressed(failure);
      if (KafkaErrors.isFenced(e)) {
        throw fencedBy(e);
      }
      throw e; // the producer is in a fatal state
    }
    metrics.aborted();
  }

  /**
   * Aborts the open transaction before the loop stops for {@code stop}, once: the producer closes
   * with the loop, which ends the transaction anyway. A fence the abort reveals is what the loop
   * stops for, so that {@link #fenced()} tells; any other abort failure rides along, suppressed.
   */
  private RuntimeException abortToStop(RuntimeException stop) {
    try {
      producer.abortTransaction();
      metrics.aborted();
    } catch (KafkaException e) {
      if (KafkaErrors.isFenced(e)) {
        e.addSuppressed(stop);
        return fencedBy(e);
      }
      stop.addSuppressed(e);
    } catch (RuntimeException e) { // IllegalStateException: the producer's state allows no abort
      stop.addSuppressed(e);
    }
    return stop;
  }

  /** Back to each partition's first record of this batch: where the aborted transaction began. */
  private void rewind(ConsumerRecords<byte[], byte[]> records) {
    for (TopicPartition tp : records.partitions()) {
      if (consumer.assignment().contains(tp)) {
        consumer.seek(tp, records.records(tp).get(0).offset());
      }
    }
  }

  private static <K, V> Map<TopicPartition, OffsetAndMetadata> nextOffsets(
      ConsumerRecords<K, V> records) {
    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    for (TopicPartition tp : records.partitions()) {
      List<ConsumerRecord<K, V>> list = records.records(tp);
      offsets.put(tp, new OffsetAndMetadata(list.get(list.size() - 1).offset() + 1));
    }
    return offsets;
  }

  private void closeProducer() {
    if (!producerClosed) {
      producerClosed = true;
      try {
        producer.close(Duration.ZERO);
      } catch (RuntimeException e) {
        log.debug("Closing the producer failed: {}", e.toString());
      }
    }
  }

  private void closeAll() {
    closeProducer();
    try {
      decoder.close();
      serializer.close();
    } catch (RuntimeException e) {
      log.debug("Closing a serializer or deserializer failed: {}", e.toString());
    }
    try {
      consumer.close(CloseOptions.timeout(config.closeTimeout()));
    } catch (RuntimeException e) {
      log.warn("Closing the consumer failed: {}", e.toString());
    }
  }

  /** A record's failure that a retry can cure: the batch is aborted and tried again later. */
  private static final class TransientRecordFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    TransientRecordFailure(String message, Throwable cause) {
      super(message, cause);
    }
  }
}
