package dev.nolock.ownership.internal;

import dev.nolock.ownership.LogStartMismatchException;
import dev.nolock.ownership.OwnershipConfig;
import dev.nolock.ownership.PartitionCountChangedException;
import dev.nolock.ownership.RecordHandler;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.sql.SqlErrors;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.errors.WakeupException;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The runner's loop, on one thread that owns the consumer: poll, claim what was assigned (and retry
 * the claims that failed), apply each owned partition's records in offset order, one transaction
 * per record.
 *
 * <p>The poll moves the consumer's position past the records it returns, and the apply's offset
 * check only refuses offsets at or below the last applied one, so a record of an owned partition
 * that is returned but not applied would be skipped for good. Every path that leaves such records
 * unapplied (a backoff started in this turn, the point of no return, closing, a failed apply)
 * therefore seeks each owned partition back to its first record not applied. Records of a partition
 * not owned here are dropped without a seek: a claim seeks to the table's position.
 *
 * <p>Per record, in order: skip it if its partition is not owned here (lost, fenced, unclaimed);
 * check the point of no return ({@code sessionTimeout - safetyMargin} after the poll that fetched
 * it was sent), else rewind and poll again; run the {@link ApplyTransaction} (ownership and offset
 * check, then the handler); on {@link ApplyOutcome#FENCED} step aside from the partition at once;
 * when PostgreSQL failed and the outcome is unknown, rewind and retry the same record with the same
 * epoch after a backoff (a replay if the first send had committed). A record that fails for good
 * (its deserializer or the handler throws) stops the runner, or with a dead-letter topic is sent
 * there and then recorded as applied ({@link #deadLetter}).
 *
 * <p>Rebalance callbacks run inside {@code poll} on this same thread, so no apply is in flight when
 * a partition is revoked: the revoked partitions' positions are committed and they are dropped;
 * lost partitions are dropped without a commit.
 */
public final class OwnerLoop<K, V> {

  private static final Logger log = LoggerFactory.getLogger(OwnerLoop.class);

  private final OwnershipConfig config;
  private final Consumer<byte[], byte[]> consumer;
  private final RecordDecoder<K, V> decoder;

  /** Null without a dead-letter topic: a record that fails for good stops the runner. */
  private final DeadLetters deadLetters;

  private final DSLContext dsl;
  private final OwnerTable table;
  private final ApplyTransaction<K, V> applier;
  private final OwnerEvents events;
  private final OwnershipMetricsFactory metricsFactory;
  private final LeaseClock clock;

  /**
   * The backoff after PostgreSQL failures; only its delay is used: the runner retries for as long
   * as it owns the partition, so attempts and elapsed time are not bounded here.
   */
  private final RetryPolicy backoff;

  private final AtomicBoolean closing = new AtomicBoolean();

  /** When {@link #requestClose()} was called ({@link System#nanoTime()}); read once closing. */
  private volatile long closeRequestedAt;

  private final String topic;
  private final String group;
  private final String owner;

  private volatile Map<Integer, FencingToken> ownedView = Map.of();

  // Loop-thread state from here on.
  private final Map<TopicPartition, Owned> owned = new HashMap<>();

  /** Assigned, but the claim failed on a backend error: paused until a retry claims it. */
  private final Set<TopicPartition> unclaimed = new LinkedHashSet<>();

  /**
   * Fenced while assigned: paused, and claimed again if it is still assigned here after a later
   * rebalance or, failing that, a session timeout of running later (see {@link #retryClaims()}). A
   * re-claim that does not succeed leaves it here, under the same timer.
   */
  private final Map<TopicPartition, SteppedAside> steppedAside = new HashMap<>();

  private OwnershipMetrics metrics;
  private int partitionCount;
  private long pollSentNanos;
  private PauseWatchdog watchdog;

  /**
   * Partitions whose rows {@code start()} did not record (its log start lookup failed): recorded by
   * {@link #claimAll} before their first claim here, unless another runner recorded them first.
   */
  private final Set<TopicPartition> unrecorded = new HashSet<>();

  /** Assigned partitions whose last log start lookup failed: warned about once per run of them. */
  private final Set<TopicPartition> lookupFailing = new HashSet<>();

  /**
   * No turn is under way: the last poll's records were applied or rewound, so every offset between
   * an owned partition's next offset and its position held no record for the handler (see {@link
   * #recordPassedOffsets()}). A poll that throws (a wakeup at close) returns no records, so the
   * previous turn's state stands.
   */
  private boolean settled = true;

  private int backendFailures;
  private long backoffUntilNanos;

  /** Records dead-lettered since the last applied one: the circuit breaker's count. */
  private int consecutiveDeadLetters;

  private boolean backingOff;
  private long lastCommitNanos;
  private RuntimeException fatal;

  /** Creates the metrics once the partition count is known. */
  @FunctionalInterface
  public interface OwnershipMetricsFactory {
    OwnershipMetrics create(int partitions);
  }

  /**
   * The consumer's generation (member epoch) and the watchdog's running time ({@link
   * PauseWatchdog#mark}) when a partition was fenced.
   */
  private record SteppedAside(int generation, long sinceMark) {}

  private static final class Owned {
    final long epoch;

    /** The first offset not applied. */
    long nextOffset;

    boolean uncommitted;

    Owned(long epoch, long nextOffset) {
      this.epoch = epoch;
      this.nextOffset = nextOffset;
    }
  }

  public OwnerLoop(
      OwnershipConfig config,
      Consumer<byte[], byte[]> consumer,
      RecordDecoder<K, V> decoder,
      DeadLetters deadLetters,
      DSLContext dsl,
      RecordHandler<K, V> handler,
      Safeguards safeguards,
      OwnerEvents events,
      OwnershipMetricsFactory metricsFactory) {
    this.config = config;
    this.consumer = consumer;
    this.decoder = decoder;
    this.deadLetters = deadLetters;
    this.dsl = dsl;
    this.table = new OwnerTable(config.tableName());
    this.events = events;
    this.metricsFactory = metricsFactory;
    this.clock = config.clock();
    this.backoff =
        RetryPolicy.custom()
            .baseDelay(config.retryBaseDelay())
            .maxDelay(config.retryMaxDelay())
            .build();
    this.topic = config.topic();
    this.group = config.groupId();
    this.owner = config.ownerId();
    this.applier =
        new ApplyTransaction<>(
            dsl,
            table,
            group,
            owner,
            handler,
            safeguards,
            config.queryTimeout(),
            config.transactionIdleTimeout(),
            deadLetters != null,
            config.deadLetterWhen());
  }

  /** The partitions owned here and their epochs; safe to call from any thread. */
  public Map<Integer, FencingToken> ownedPartitions() {
    return ownedView;
  }

  /** Asks the loop to stop; safe to call from any thread. */
  public void requestClose() {
    long now = System.nanoTime();
    if (!closing.get()) {
      closeRequestedAt = now; // the first close() starts the close timeout
    }
    closing.set(true);
    if (deadLetters != null) {
      deadLetters.stopWaiting();
    }
    consumer.wakeup();
  }

  /** Closes the clients of a loop that never ran. */
  public void closeUnstarted() {
    try {
      consumer.close(CloseOptions.timeout(Duration.ZERO));
    } catch (RuntimeException e) {
      log.debug("Closing an unstarted consumer failed: {}", e.toString());
    }
    closeQuietly(Duration.ZERO); // nothing was sent
  }

  /** The deserializers (the consumer would have closed them) and the dead-letter producer. */
  /**
   * @param deadLetterBudget how long a dead letter still pending may be delivered: what is left of
   *     the close timeout, which {@code PartitionOwner.close()} promises as a whole
   */
  private void closeQuietly(Duration deadLetterBudget) {
    try {
      decoder.close();
    } catch (RuntimeException e) {
      log.debug("Closing a deserializer failed: {}", e.toString());
    }
    if (deadLetters != null) {
      try {
        deadLetters.close(deadLetterBudget);
      } catch (RuntimeException e) {
        log.debug("Closing the dead-letter producer failed: {}", e.toString());
      }
    }
  }

  /**
   * Runs until {@link #requestClose()} or a fatal failure, which is thrown. Always closes the
   * consumer (leaving the group) before returning.
   */
  public void run() {
    try {
      partitionCount = discoverPartitionCount();
      metrics = metricsFactory.create(partitionCount);
      Map<Integer, Long> logStarts = logStartsAtRegistration();
      for (int p = 0; p < partitionCount; p++) {
        if (!logStarts.containsKey(p)) {
          unrecorded.add(new TopicPartition(topic, p));
        }
      }
      SqlErrors.run(
          () ->
              "recording the partition count of '"
                  + topic
                  + "' in "
                  + table
                  + ". Start a new runner: the registration is idempotent",
          () -> {
            table.register(dsl, group, topic, partitionCount, config.queryTimeout(), logStarts);
            return null;
          });
      log.info(
          "Owner {} of group {} subscribing to {} ({} partitions)",
          owner,
          group,
          topic,
          partitionCount);
      consumer.subscribe(List.of(topic), new Listener());
      lastCommitNanos = clock.nanoTime();
      watchdog =
          new PauseWatchdog(
              clock,
              config.safetyMargin(),
              config.sessionTimeout(),
              "nolock-owner-watchdog-" + group + "-" + owner);
      watchdog.start();
      while (!closing.get()) {
        endBackoffIfDue();
        pollSentNanos = clock.nanoTime();
        ConsumerRecords<byte[], byte[]> records = consumer.poll(nextPollTimeout());
        settled = false;
        throwIfFatal();
        checkPartitionCount();
        retryClaims();
        throwIfFatal();
        if (!records.isEmpty()) {
          process(records);
          throwIfFatal();
        }
        updateLag();
        commitIfDue();
        settled = true;
      }
    } catch (WakeupException | InterruptException e) {
      if (!closing.get()) {
        throw e;
      }
    } finally {
      shutdown();
    }
  }

  private int discoverPartitionCount() {
    List<PartitionInfo> infos = consumer.partitionsFor(topic, Duration.ofSeconds(30));
    if (infos == null || infos.isEmpty()) {
      throw new IllegalStateException(
          "Topic '"
              + topic
              + "' does not exist (or has no partitions) on "
              + config.bootstrapServers()
              + ": create it with the partition count you mean to keep.");
    }
    return infos.size();
  }

  private void checkPartitionCount() {
    List<PartitionInfo> infos = consumer.partitionsFor(topic);
    if (infos != null && !infos.isEmpty() && infos.size() != partitionCount) {
      fatal = new PartitionCountChangedException(topic, partitionCount, infos.size());
      throwIfFatal();
    }
  }

  private int actualCount(TopicPartition added) {
    List<PartitionInfo> infos = consumer.partitionsFor(topic);
    return Math.max(added.partition() + 1, infos == null ? 0 : infos.size());
  }

  private void throwIfFatal() {
    if (fatal != null) {
      RuntimeException e = fatal;
      fatal = null;
      throw e;
    }
  }

  private Duration nextPollTimeout() {
    Duration poll = config.pollTimeout();
    if (backingOff) {
      long left = backoffUntilNanos - clock.nanoTime();
      if (left > 0 && left < poll.toNanos()) {
        return Duration.ofNanos(left);
      }
    }
    return poll;
  }

  /**
   * Every partition's log start, recorded in the rows {@link OwnerTable#register} creates, so that
   * records deleted before a partition's first claim stop that claim. Empty when the lookup fails
   * (a WARN): no row is recorded then (a row saying -1 would mean "the log started at 0"), and
   * {@link #claimAll} records a missing row with the log start it looks up before its first claim.
   */
  private Map<Integer, Long> logStartsAtRegistration() {
    List<TopicPartition> all = new ArrayList<>();
    for (int p = 0; p < partitionCount; p++) {
      all.add(new TopicPartition(topic, p));
    }
    try {
      Map<Integer, Long> starts = new HashMap<>();
      lookUpLogStarts(all).forEach((tp, start) -> starts.put(tp.partition(), start));
      return starts;
    } catch (WakeupException | InterruptException e) {
      throw e;
    } catch (KafkaException e) {
      log.warn(
          "Could not look up the log starts of {} before recording its partitions ({}): their"
              + " rows are recorded before their first claims, with the log starts found then;"
              + " records deleted before that are not applied",
          topic,
          e.toString());
      return Map.of();
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Applying

  private void process(ConsumerRecords<byte[], byte[]> records) {
    if (backingOff) {
      // A claim failed in this turn (its retry, or the claim in the rebalance callback inside
      // poll) after the poll had moved the positions past these records.
      rewind(records);
      return;
    }
    Deadline deadline = Deadline.forHolder(clock, pollSentNanos, config.sessionTimeout());
    for (TopicPartition tp : records.partitions()) {
      for (ConsumerRecord<byte[], byte[]> record : records.records(tp)) {
        Owned o = owned.get(tp);
        if (o == null) {
          break; // not owned here (any more): a claim seeks to the table's position itself
        }
        if (record.offset() < o.nextOffset) {
          continue;
        }
        if (closing.get()) {
          rewind(records);
          return;
        }
        try {
          deadline.checkPointOfNoReturn(config.safetyMargin(), Duration.ZERO);
        } catch (LeaseLostException e) {
          log.debug("Point of no return passed on {}: polling before applying more", tp);
          rewind(records);
          return;
        }
        events.beforeApply(tp.partition(), record.offset(), o.epoch);
        ApplyOutcome outcome;
        try {
          outcome = applier.apply(decoder.decode(record), o.epoch);
        } catch (RecordFailedException failed) {
          if (deadLetters == null || !failed.deadLetterable()) {
            throw failed;
          }
          if (consecutiveDeadLetters >= config.maxConsecutiveDeadLetters()) {
            throw breakerTripped(failed);
          }
          if (closing.get()) {
            // A send now would be cut short by close() and count as not acknowledged, though the
            // producer's close may still deliver it: the next owner would dead-letter it again.
            rewind(records);
            return;
          }
          outcome = deadLetter(record, o.epoch, failed, records, deadline);
          if (outcome == null) {
            return;
          }
        } catch (BackendUnavailableException unknown) {
          // Committed or not, the retry of the same record with the same epoch commits it once:
          // a replay if it had.
          rewind(records);
          startBackoff(
              unknown.getCause(),
              "applying " + tp + "@" + record.offset(),
              OwnerEvents.BackoffCause.APPLY);
          return;
        }
        events.outcome(tp.partition(), record.offset(), o.epoch, outcome);
        switch (outcome) {
          case APPLIED -> {
            consecutiveDeadLetters = 0;
            metrics.applied(tp.partition());
            o.nextOffset = record.offset() + 1;
            o.uncommitted = true;
            backendFailures = 0;
          }
          case REPLAY -> {
            metrics.replaySkipped(tp.partition());
            o.nextOffset = record.offset() + 1;
            o.uncommitted = true;
            backendFailures = 0;
          }
          case DEAD_LETTERED -> {
            consecutiveDeadLetters++;
            metrics.deadLettered(tp.partition());
            o.nextOffset = record.offset() + 1;
            o.uncommitted = true;
            backendFailures = 0;
          }
          case FENCED -> stepAside(tp, o);
        }
      }
    }
  }

  /**
   * A record that failed for good, with a dead-letter topic: send it there, then record its offset
   * as applied. The order is the guarantee:
   *
   * <ol>
   *   <li>Send it and wait for the broker's acknowledgement ({@link DeadLetters#send}), at most
   *       until the batch's point of no return. A send that fails or times out, or is not
   *       acknowledged in that time, leaves the record not handled: a retriable failure rewinds and
   *       backs off, so the record is applied (and fails, and is sent) again; any other stops the
   *       runner.
   *   <li>Record its offset in a transaction of its own with the apply's ownership and offset
   *       checks ({@link ApplyTransaction#recordDeadLettered}): a zombie is refused ({@code
   *       FENCED}) as its apply would be. An unknown outcome rewinds and backs off; the retry finds
   *       the offset recorded ({@code REPLAY}, nothing sent) or sends the record again.
   * </ol>
   *
   * <p>A crash or lost answer between the two sends the record again: at least once in the
   * dead-letter topic.
   *
   * @return the outcome of step 2, or null when the batch was rewound for a backoff
   */
  private ApplyOutcome deadLetter(
      ConsumerRecord<byte[], byte[]> record,
      long epoch,
      RecordFailedException failed,
      ConsumerRecords<byte[], byte[]> records,
      Deadline deadline) {
    String where = record.topic() + "-" + record.partition() + "@" + record.offset();
    // The send waits no longer than the batch may still run: past that, the partition may belong
    // to another member, and this thread must poll again.
    Duration wait = deadline.remaining().minus(config.safetyMargin());
    if (wait.isNegative() || wait.isZero()) {
      // The handler failed past the point of no return. Polling at once and applying again would
      // loop as fast as the handler fails, forever if it is always this slow: back off, and say so.
      rewind(records);
      Duration delay = backOff(OwnerEvents.BackoffCause.DEAD_LETTER);
      log.warn(
          "{} failed in its {} after the batch's point of no return (sessionTimeout minus"
              + " safetyMargin), so there is no time left to dead-letter it; retrying in {} ms. A"
              + " handler slower than that to fail can never be dead-lettered: raise"
              + " sessionTimeout. The failure: {}",
          where,
          failed.stage().header(),
          delay.toMillis(),
          ErrorDescriber.describe(ErrorDescriber.classNames(), failed.getCause()));
      return null;
    }
    try {
      deadLetters.send(record, failed, () -> deadline.remaining().minus(config.safetyMargin()));
    } catch (DeadLetters.SendFailedException e) {
      e.addSuppressed(failed);
      if (!e.retriable()) {
        throw e;
      }
      rewind(records);
      startBackoff(
          e.getCause(),
          "sending " + where + " to the dead-letter topic",
          OwnerEvents.BackoffCause.DEAD_LETTER);
      return null;
    }
    log.warn(
        "{} failed in its {} and was sent to the dead-letter topic {}: {}",
        where,
        failed.stage().header(),
        deadLetters.topic(),
        StopReason.describe(failed));
    try {
      return applier.recordDeadLettered(record, epoch);
    } catch (BackendUnavailableException unknown) {
      rewind(records);
      startBackoff(
          unknown.getCause(),
          "recording " + where + " as dead-lettered",
          OwnerEvents.BackoffCause.APPLY);
      return null;
    }
  }

  private IllegalStateException breakerTripped(RecordFailedException failed) {
    IllegalStateException stop =
        new IllegalStateException(
            "The runner dead-lettered "
                + consecutiveDeadLetters
                + " records in a row (maxConsecutiveDeadLetters) and the next one failed too ("
                + failed.getMessage()
                + "). So many failures in a row look systemic (a bug, a dependency refusing every"
                + " call), not poison records: the runner stops as it would without a dead-letter"
                + " topic. Fix the cause and restart; the dead-lettered records may need a replay.",
            failed.getCause());
    stop.addSuppressed(failed);
    return stop;
  }

  /**
   * Seeks every owned partition of this batch back to its first record not yet applied. Had records
   * been deleted since the fetch, the next poll fails with {@code OffsetOutOfRangeException}, as it
   * should: they were not applied.
   */
  private void rewind(ConsumerRecords<byte[], byte[]> records) {
    for (TopicPartition tp : records.partitions()) {
      Owned o = owned.get(tp);
      if (o != null) {
        consumer.seek(tp, o.nextOffset);
      }
    }
  }

  private void stepAside(TopicPartition tp, Owned o) {
    metrics.fenced(tp.partition());
    log.warn(
        "{} is fenced: the ownership row carries an epoch newer than {}; owner {} stops writing"
            + " it and leaves it to its new owner (claimed again if still assigned here after the"
            + " next rebalance or {} of running; see the partitions.stepped.aside gauge)",
        tp,
        o.epoch,
        owner,
        config.sessionTimeout());
    owned.remove(tp);
    metrics.released(tp.partition());
    consumer.pause(List.of(tp));
    steppedAside.put(
        tp,
        new SteppedAside(consumer.groupMetadata().generationId(), watchdog.mark(clock.nanoTime())));
    metrics.steppedAside(steppedAside.size());
    events.released(tp.partition(), "fenced");
    publishView();
    // A member that was fenced is usually no longer in the group and learns it at the next poll;
    // if it still is, a rebalance tells who owns the partition now. A member of the consumer
    // protocol (KIP-848) cannot ask for one (the call only logs a warning): retryClaims' timer
    // covers it.
    if (!config.usesConsumerGroupProtocol()) {
      consumer.enforceRebalance("partition " + tp + " fenced by a newer owner epoch");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Claiming

  /**
   * Claims {@code tps}, assigned here and not owned, after a poll or in the rebalance callback.
   * {@code asides} holds those that were stepped aside: one not claimed now stays stepped aside,
   * under its timer; any other not claimed now is retried after the next poll.
   *
   * <ol>
   *   <li>Past the point of no return, claim nothing: the assignment may be stale.
   *   <li>Read the rows (no lock): those that say nothing applied ({@code -1}) need the partition's
   *       log start (see {@link OwnerTable#claim}).
   *   <li>Look those log starts up in Kafka in one call, before any claim transaction, so no row
   *       lock or connection is held while Kafka answers. On failure only those partitions wait,
   *       unclaimed, for the next turn: no backoff, nothing counted as a PostgreSQL failure.
   *   <li>Claim each of the others in its own transaction.
   * </ol>
   */
  private void claimAll(
      Collection<TopicPartition> tps,
      OwnerEvents.BackoffCause onFailure,
      Map<TopicPartition, SteppedAside> asides) {
    if (tps.isEmpty()) {
      return;
    }
    if (pastPointOfNoReturn()) {
      // Too late to be sure the assignment still stands: claim after the next poll.
      tps.forEach(tp -> notClaimed(tp, asides.get(tp)));
      return;
    }
    Map<Integer, Long> rows;
    try {
      rows =
          table.lastApplied(
              dsl,
              group,
              topic,
              tps.stream().map(TopicPartition::partition).toList(),
              config.queryTimeout());
    } catch (DataAccessException e) {
      if (!SqlErrors.isTransient(e)) {
        fatal = e;
        return;
      }
      tps.forEach(tp -> notClaimed(tp, asides.get(tp)));
      startBackoff(e, "reading the ownership rows of " + tps, onFailure);
      return;
    }
    List<TopicPartition> lookUp =
        tps.stream()
            .filter(
                tp ->
                    rows.containsKey(tp.partition())
                        ? rows.get(tp.partition()) == -1
                        : unrecorded.contains(tp))
            .toList();
    Map<TopicPartition, Long> logStarts = Map.of();
    if (!lookUp.isEmpty()) {
      try {
        logStarts = lookUpLogStarts(lookUp);
        lookupFailing.removeAll(lookUp);
      } catch (WakeupException | InterruptException e) {
        throw e;
      } catch (KafkaException e) {
        metrics.logStartLookupFailed();
        for (TopicPartition tp : lookUp) {
          notClaimed(tp, asides.get(tp));
        }
        if (lookupFailing.addAll(lookUp)) {
          log.warn(
              "Could not look up the log start of {} (needed to claim a partition with nothing"
                  + " applied); retrying at each poll, the runner's other partitions go on: {}",
              lookUp,
              e.toString());
        } else {
          log.debug("Log start lookup of {} failed again: {}", lookUp, e.toString());
        }
      }
    }
    if (!recordMissingRows(tps, rows, logStarts, onFailure, asides)) {
      return;
    }
    for (TopicPartition tp : tps) {
      if (lookUp.contains(tp) && !logStarts.containsKey(tp)) {
        continue;
      }
      if (backingOff || fatal != null) {
        notClaimed(tp, asides.get(tp)); // a claim before it failed in this turn
        continue;
      }
      claim(tp, logStarts.get(tp), onFailure, asides.get(tp));
    }
  }

  private boolean pastPointOfNoReturn() {
    try {
      Deadline.forHolder(clock, pollSentNanos, config.sessionTimeout())
          .checkPointOfNoReturn(config.safetyMargin(), Duration.ZERO);
      return false;
    } catch (LeaseLostException e) {
      return true;
    }
  }

  /**
   * Records the rows {@code start()} could not, for those of {@code tps} whose log start is now
   * known and whose row is still missing, in one idempotent transaction ({@link
   * OwnerTable#register}). False when it failed: the partitions wait, unclaimed, for the next turn
   * (a backoff for a transient failure), or the runner stops.
   */
  private boolean recordMissingRows(
      Collection<TopicPartition> tps,
      Map<Integer, Long> rows,
      Map<TopicPartition, Long> logStarts,
      OwnerEvents.BackoffCause onFailure,
      Map<TopicPartition, SteppedAside> asides) {
    Map<Integer, Long> toRecord = new HashMap<>();
    for (TopicPartition tp : tps) {
      if (unrecorded.contains(tp)
          && !rows.containsKey(tp.partition())
          && logStarts.containsKey(tp)) {
        toRecord.put(tp.partition(), logStarts.get(tp));
      }
    }
    if (toRecord.isEmpty()) {
      return true;
    }
    try {
      table.register(dsl, group, topic, partitionCount, config.queryTimeout(), toRecord);
    } catch (PartitionCountChangedException e) {
      fatal = e;
      return false;
    } catch (DataAccessException e) {
      if (!SqlErrors.isTransient(e)) {
        fatal = e;
        return false;
      }
      tps.forEach(tp -> notClaimed(tp, asides.get(tp)));
      startBackoff(e, "recording the ownership rows of " + toRecord.keySet(), onFailure);
      return false;
    }
    unrecorded.removeIf(tp -> toRecord.containsKey(tp.partition()));
    return true;
  }

  private void claim(
      TopicPartition tp, Long logStart, OwnerEvents.BackoffCause onFailure, SteppedAside aside) {
    if (pastPointOfNoReturn()) {
      notClaimed(tp, aside);
      return;
    }
    OwnerTable.Claim claim;
    try {
      claim =
          table.claim(
              dsl,
              group,
              topic,
              tp.partition(),
              partitionCount,
              owner,
              config.queryTimeout(),
              logStart);
    } catch (OwnerTable.LogStartNeededException e) {
      notClaimed(tp, aside); // the row was set to -1 since it was read: look it up next turn
      return;
    } catch (LogStartMismatchException | PartitionCountChangedException | IllegalStateException e) {
      fatal = e;
      return;
    } catch (DataAccessException e) {
      if (!SqlErrors.isTransient(e)) {
        fatal = e;
        return;
      }
      notClaimed(tp, aside);
      startBackoff(e, "claiming " + tp, onFailure);
      return;
    }
    long start = events.startOffset(tp.partition(), claim.lastApplied());
    consumer.seek(tp, start);
    owned.put(tp, new Owned(claim.epoch(), start));
    unclaimed.remove(tp);
    steppedAside.remove(tp);
    metrics.steppedAside(steppedAside.size());
    if (backingOff) {
      consumer.pause(List.of(tp)); // resumed with the others when the backoff ends
    } else {
      consumer.resume(List.of(tp));
    }
    metrics.claimed(tp.partition());
    metrics.owned(tp.partition());
    events.claimed(tp.partition(), claim.epoch(), claim.lastApplied());
    log.info(
        "Owner {} claimed {} with epoch {}; applying from offset {}",
        owner,
        tp,
        claim.epoch(),
        start);
    publishView();
  }

  /**
   * The first offset of each partition's log in Kafka, in one call bounded by {@code pollTimeout}
   * (at most half the claim window), so that a partition without a leader delays the loop only that
   * long per turn.
   *
   * @throws KafkaException when the lookup failed or left a partition out
   */
  private Map<TopicPartition, Long> lookUpLogStarts(List<TopicPartition> tps) {
    events.beforeLogStartLookup(
        tps.stream().map(TopicPartition::partition).collect(Collectors.toSet()));
    Map<TopicPartition, Long> starts = consumer.beginningOffsets(tps, config.pollTimeout());
    for (TopicPartition tp : tps) {
      if (starts.get(tp) == null) {
        throw new KafkaException("No log start offset returned for " + tp);
      }
    }
    return starts;
  }

  /** A partition not claimed now: back to stepped aside ({@code aside} not null), or unclaimed. */
  private void notClaimed(TopicPartition tp, SteppedAside aside) {
    if (aside != null) {
      steppedAside.put(tp, aside);
      unclaimed.remove(tp);
      parkUnowned(tp);
    } else {
      markUnclaimed(tp);
    }
  }

  private void markUnclaimed(TopicPartition tp) {
    unclaimed.add(tp);
    parkUnowned(tp);
  }

  /**
   * Pauses an assigned partition this runner does not own, and gives it a placeholder position: the
   * consumer resolves a position for every assigned partition, and with {@code
   * auto.offset.reset=none} a partition without a committed offset would fail the poll. Nothing is
   * fetched while it is paused; a claim seeks to the real position.
   */
  private void parkUnowned(TopicPartition tp) {
    consumer.pause(List.of(tp));
    consumer.seekToBeginning(List.of(tp));
  }

  /**
   * Claims that failed, and fenced partitions still assigned here; after a poll only.
   *
   * <p>A fenced partition is claimed again when it is still assigned here after the generation
   * changed (a rebalance kept it here), or once the process has run for a session timeout since it
   * was fenced, pauses excluded and counted only since the last pause that could have expired the
   * session ({@link PauseWatchdog}): a pause stops the heartbeats too, so only running time counts,
   * while a slow loop (a slow apply, a claim waiting on a row lock) does not stop the count, as the
   * heartbeats go on on the consumer's own thread. The timer is what works with both group
   * protocols: the consumer protocol has no rebalance a member can ask for, and its member epoch
   * changes only when the group does. Within a session timeout of running (the heartbeat interval
   * is shorter), a member that is no longer in the group hears so at a heartbeat and loses its
   * partitions, so a partition still assigned after that is this member's, and whoever fenced it
   * was a late claim. Were that wrong (the coordinator unreachable from here, so the consumer has
   * not heard yet), the claim would fence the rightful owner until it claims back: progress would
   * suffer, never the epoch check. A re-claim that does not succeed leaves the partition stepped
   * aside, so the next attempt checks the timer again.
   */
  private void retryClaims() {
    if (backingOff) {
      return;
    }
    Set<TopicPartition> assignment = consumer.assignment();
    int generation = consumer.groupMetadata().generationId();
    long now = clock.nanoTime();
    Map<TopicPartition, SteppedAside> due = new LinkedHashMap<>();
    for (Iterator<Map.Entry<TopicPartition, SteppedAside>> it = steppedAside.entrySet().iterator();
        it.hasNext(); ) {
      Map.Entry<TopicPartition, SteppedAside> entry = it.next();
      SteppedAside aside = entry.getValue();
      if (!assignment.contains(entry.getKey())) {
        it.remove();
      } else if (aside.generation() != generation
          || watchdog.runningSince(aside.sinceMark(), now) >= config.sessionTimeout().toNanos()) {
        it.remove();
        due.put(entry.getKey(), aside);
      }
    }
    unclaimed.retainAll(assignment);
    lookupFailing.retainAll(assignment);
    List<TopicPartition> toClaim = new ArrayList<>(unclaimed);
    toClaim.addAll(due.keySet());
    claimAll(toClaim, OwnerEvents.BackoffCause.CLAIM_RETRY, due);
    metrics.steppedAside(steppedAside.size());
  }

  // ---------------------------------------------------------------------------------------------
  // Backend failures: pause everything, keep polling (membership stays alive), retry later.

  /**
   * Pauses applying for a backoff drawn by {@link RetryPolicy#backoff}, whose ceiling stays at the
   * max delay however many failures came before; the count saturates rather than wraps, so an
   * outage of any length only keeps the runner waiting.
   */
  private void startBackoff(Throwable cause, String during, OwnerEvents.BackoffCause why) {
    Duration delay = backOff(why);
    log.warn(
        "Failed while {} (failure {} in a row); retrying in {} ms: {}",
        during,
        backendFailures,
        delay.toMillis(),
        // The SQLState and the server's primary message, or class names: the cause can be the
        // handler's own exception, whose message may quote the record.
        SqlErrors.serverMessage(cause));
  }

  /**
   * Pauses the assigned partitions for the next backoff delay, counted as a backend failure.
   *
   * @return the delay
   */
  private Duration backOff(OwnerEvents.BackoffCause why) {
    if (backendFailures < Integer.MAX_VALUE) {
      backendFailures++;
    }
    Duration delay = backoff.backoff(backendFailures, ThreadLocalRandom.current());
    backoffUntilNanos = clock.nanoTime() + delay.toNanos();
    backingOff = true;
    metrics.backendFailure();
    events.backingOff(backendFailures, delay, why);
    consumer.pause(consumer.assignment());
    return delay;
  }

  private void endBackoffIfDue() {
    if (backingOff && clock.nanoTime() - backoffUntilNanos >= 0) {
      backingOff = false;
      consumer.resume(owned.keySet());
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Offsets in Kafka: for lag tools only; positions come from the ownership table.

  private void commitIfDue() {
    if (clock.nanoTime() - lastCommitNanos < config.commitInterval().toNanos()) {
      return;
    }
    lastCommitNanos = clock.nanoTime();
    recordPassedOffsets();
    Map<TopicPartition, OffsetAndMetadata> offsets = uncommitted(owned.keySet());
    if (!offsets.isEmpty()) {
      consumer.commitAsync(
          offsets,
          (committed, e) -> {
            if (e != null) {
              log.debug("Committing {} to Kafka failed (informational only): {}", committed, e);
            }
          });
    }
  }

  /**
   * Moves the rows of owned partitions past offsets the consumer passed without a record for the
   * handler: transaction markers and aborted records under {@code read_committed}. Such offsets
   * advance the consumer's position but never reach an apply, so without this a partition whose
   * last offsets are markers keeps a row before them; once retention deletes them, its next claim
   * seeks below the log start ({@code OffsetOutOfRangeException}), or, for a partition that only
   * ever saw aborted transactions, finds {@code -1} on a log above 0 ({@link
   * dev.nolock.ownership.LogStartMismatchException}).
   *
   * <p>Called at the commit interval and at a clean close, only between turns ({@link #settled}):
   *
   * <ol>
   *   <li>Skipped while backing off (the positions were rewound) and for paused partitions.
   *   <li>The consumer's position only counts records it returned, and each returned record of an
   *       owned partition was applied, found applied, or rewound to; so when the position is above
   *       the next offset, the offsets between held no record for the handler.
   *   <li>One compare-and-swap statement ({@link OwnerTable#skipTo}) moves the row to the offset
   *       before the position if it still carries this epoch and owner; a refusal changes nothing
   *       here (the next apply finds out about a newer epoch), a failure ends this interval's pass,
   *       and the next interval tries again.
   * </ol>
   */
  private void recordPassedOffsets() {
    if (backingOff) {
      return;
    }
    Set<TopicPartition> paused = consumer.paused();
    for (Map.Entry<TopicPartition, Owned> entry : owned.entrySet()) {
      TopicPartition tp = entry.getKey();
      Owned o = entry.getValue();
      if (paused.contains(tp)) {
        continue;
      }
      long position;
      try {
        position = consumer.position(tp, Duration.ZERO);
      } catch (WakeupException | InterruptException e) {
        throw e; // closing: the caller's
      } catch (KafkaException | IllegalStateException e) {
        continue; // no position now (none yet, or being reassigned): nothing to record
      }
      if (position <= o.nextOffset) {
        continue;
      }
      try {
        int moved =
            table.skipTo(
                dsl,
                group,
                topic,
                tp.partition(),
                o.epoch,
                owner,
                o.nextOffset - 1,
                position - 1,
                config.queryTimeout());
        if (SqlErrors.atMostOneRow(moved, "skip past markers on " + tp, table, OwnerTable.KEY)) {
          log.debug(
              "{}: offsets {} to {} held no record to apply (transaction markers or aborted"
                  + " records); the ownership row now says {}",
              tp,
              o.nextOffset,
              position - 1,
              position - 1);
          o.nextOffset = position;
          o.uncommitted = true;
        }
      } catch (DataAccessException e) {
        // One failure is enough for this interval: trying every partition against a database that
        // does not answer would hold the loop for partitions × queryTimeout.
        log.debug(
            "Recording the offsets {} passed failed (tried again later): {}", tp, e.toString());
        return;
      }
    }
  }

  private Map<TopicPartition, OffsetAndMetadata> uncommitted(Collection<TopicPartition> tps) {
    Map<TopicPartition, OffsetAndMetadata> offsets = new LinkedHashMap<>();
    for (TopicPartition tp : tps) {
      Owned o = owned.get(tp);
      if (o != null && o.uncommitted) {
        offsets.put(tp, new OffsetAndMetadata(o.nextOffset));
        o.uncommitted = false;
      }
    }
    return offsets;
  }

  private void commitQuietly(Collection<TopicPartition> tps) {
    Map<TopicPartition, OffsetAndMetadata> offsets = uncommitted(tps);
    if (offsets.isEmpty()) {
      return;
    }
    try {
      consumer.commitSync(offsets, Duration.ofSeconds(5));
    } catch (KafkaException e) {
      log.debug("Committing {} to Kafka failed (informational only): {}", offsets, e.toString());
    }
  }

  private void updateLag() {
    for (Map.Entry<TopicPartition, Owned> entry : owned.entrySet()) {
      OptionalLong lag = consumer.currentLag(entry.getKey());
      if (lag.isPresent()) {
        metrics.lag(entry.getKey().partition(), lag.getAsLong());
      }
    }
  }

  // ---------------------------------------------------------------------------------------------

  private void release(TopicPartition tp, String why) {
    Owned o = owned.remove(tp);
    unclaimed.remove(tp);
    if (steppedAside.remove(tp) != null) {
      metrics.steppedAside(steppedAside.size());
    }
    if (o != null) {
      metrics.released(tp.partition());
      events.released(tp.partition(), why);
      log.info("Owner {} released {} (epoch {}): {}", owner, tp, o.epoch, why);
    }
  }

  private void publishView() {
    Map<Integer, FencingToken> view = new TreeMap<>();
    owned.forEach((tp, o) -> view.put(tp.partition(), FencingToken.of(o.epoch)));
    ownedView = Map.copyOf(view);
  }

  private void shutdown() {
    // The close timeout counts from close(), which waits for it; a stop of the loop's own counts
    // from here.
    long start = closing.get() ? closeRequestedAt : System.nanoTime();
    if (watchdog != null) {
      watchdog.close();
    }
    try {
      if (metrics != null) {
        if (settled) {
          recordPassedOffsets();
        }
        commitQuietly(List.copyOf(owned.keySet()));
      }
    } catch (RuntimeException e) {
      log.debug("Final commit failed: {}", e.toString());
    }
    try {
      // The whole timeout, as before a dead-letter producer shared it: leaving the group is what
      // moves the partitions at once (close() itself returns after its own bound).
      consumer.close(CloseOptions.timeout(config.closeTimeout()));
    } catch (RuntimeException e) {
      log.warn("Closing the consumer of owner {} failed: {}", owner, e.toString());
    }
    closeQuietly(left(start));
    for (TopicPartition tp : List.copyOf(owned.keySet())) {
      release(tp, "closed");
    }
    publishView();
  }

  /** What is left of the close timeout, counted from {@code start}; zero once it has passed. */
  private Duration left(long start) {
    Duration left = config.closeTimeout().minusNanos(System.nanoTime() - start);
    return left.isNegative() ? Duration.ZERO : left;
  }

  private final class Listener implements ConsumerRebalanceListener {

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      if (partitions.isEmpty()) {
        return;
      }
      metrics.rebalance("assigned");
      List<TopicPartition> toClaim = new ArrayList<>();
      for (TopicPartition tp : partitions) {
        if (!tp.topic().equals(topic)) {
          continue;
        }
        if (fatal != null || tp.partition() >= partitionCount) {
          if (fatal == null) {
            fatal = new PartitionCountChangedException(topic, partitionCount, actualCount(tp));
          }
          parkUnowned(tp);
          continue;
        }
        toClaim.add(tp);
      }
      claimAll(toClaim, OwnerEvents.BackoffCause.CLAIM_IN_REBALANCE, Map.of());
      if (fatal != null) {
        toClaim.stream().filter(tp -> !owned.containsKey(tp)).forEach(OwnerLoop.this::parkUnowned);
      }
    }

    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      if (partitions.isEmpty()) {
        return;
      }
      metrics.rebalance("revoked");
      // Nothing is in flight: applies run on this thread, and this callback runs inside poll.
      try {
        commitQuietly(partitions);
      } catch (WakeupException | InterruptException e) {
        log.debug("Commit on revocation interrupted: {}", e.toString());
      }
      for (TopicPartition tp : partitions) {
        release(tp, "revoked");
      }
      publishView();
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      if (partitions.isEmpty()) {
        return;
      }
      metrics.rebalance("lost");
      // Someone else may own them already: no commit, no further write.
      for (TopicPartition tp : partitions) {
        release(tp, "lost");
      }
      publishView();
    }
  }
}
