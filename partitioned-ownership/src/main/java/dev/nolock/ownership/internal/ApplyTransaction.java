package dev.nolock.ownership.internal;

import dev.nolock.ownership.RecordHandler;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.sql.SqlErrors;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Predicate;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.errors.RecordDeserializationException;
import org.apache.kafka.common.errors.RecordDeserializationException.DeserializationExceptionOrigin;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * One apply: the transaction that checks a record's partition is still owned with the caller's
 * epoch, advances the partition's last applied offset, and runs the handler, all or nothing.
 *
 * <p>Steps, in one PostgreSQL transaction:
 *
 * <ol>
 *   <li>{@link OwnerTable#advance}: the row moves to the record's offset only if it still carries
 *       this epoch and owner and the offset moves forward; the statement takes the row lock, so a
 *       claim waits until this transaction ends.
 *   <li>One row: the handler runs on the same transaction, which then commits ({@link
 *       ApplyOutcome#APPLIED}).
 *   <li>No row: the row is read. Another epoch or owner: {@link ApplyOutcome#FENCED} (a zombie is
 *       told so even when the record is also a replay); otherwise the offset was applied before:
 *       {@link ApplyOutcome#REPLAY}. Nothing is written either way.
 * </ol>
 *
 * <p>After a lost answer: a transaction whose {@code COMMIT} answer was lost may have committed.
 * That is reported as {@link BackendUnavailableException} (outcome unknown), never as a definite
 * outcome; the retry of the same record by the same epoch is then {@link ApplyOutcome#REPLAY} if
 * the first send committed and {@link ApplyOutcome#APPLIED} if it did not, so the record's change
 * commits once either way, and the handler runs again only when the first send rolled back.
 */
public final class ApplyTransaction<K, V> {

  private final DSLContext dsl;
  private final OwnerTable table;
  private final String group;
  private final String owner;
  private final RecordHandler<K, V> handler;
  private final Safeguards safeguards;
  private final Duration statementTimeout;
  private final Duration idleTimeout;
  private final boolean deadLetterTopic;
  private final Predicate<? super Throwable> deadLetterWhen;

  public ApplyTransaction(
      DSLContext dsl,
      OwnerTable table,
      String group,
      String owner,
      RecordHandler<K, V> handler,
      Safeguards safeguards,
      Duration statementTimeout,
      Duration idleTimeout,
      boolean deadLetterTopic,
      Predicate<? super Throwable> deadLetterWhen) {
    this.dsl = Objects.requireNonNull(dsl, "dsl");
    this.table = Objects.requireNonNull(table, "table");
    this.group = Objects.requireNonNull(group, "group");
    this.owner = Objects.requireNonNull(owner, "owner");
    this.handler = Objects.requireNonNull(handler, "handler");
    this.safeguards = Objects.requireNonNull(safeguards, "safeguards");
    this.statementTimeout = Objects.requireNonNull(statementTimeout, "statementTimeout");
    this.idleTimeout = Objects.requireNonNull(idleTimeout, "idleTimeout");
    this.deadLetterTopic = deadLetterTopic;
    this.deadLetterWhen = Objects.requireNonNull(deadLetterWhen, "deadLetterWhen");
  }

  /**
   * Applies {@code record} if its partition is still owned here with {@code epoch}.
   *
   * @throws BackendUnavailableException the handler or a deserializer failed transiently ({@link
   *     RecordFailures.Verdict#RETRY}), or PostgreSQL failed in a way worth retrying (unreachable,
   *     a lost answer, a timeout, a serialization failure, the session ended by the server, a write
   *     refused by a read-only server during a failover): whether the transaction committed is
   *     unknown; retry the same record with the same epoch
   * @throws RecordFailedException the handler failed for good (the transaction rolled back); {@link
   *     RecordFailedException#deadLetterable()} says whether the record is poison ({@link
   *     RecordFailures})
   * @throws IllegalStateException the table lost its primary key
   * @throws DataAccessException any other database error (a missing table): retrying repeats it
   */
  public ApplyOutcome apply(ConsumerRecord<K, V> record, long epoch) {
    return apply(record, epoch, tx -> handler.apply(record, tx, FencingToken.of(epoch)));
  }

  /**
   * Applies a record the runner deserialized itself. One that could not be deserialized fails as a
   * handler would, after the ownership and offset checks: a replay or a zombie's record is skipped
   * as such, never reported as failed.
   *
   * @throws RecordFailedException the record cannot be read (the transaction rolled back)
   */
  public ApplyOutcome apply(RecordDecoder.Decoded<K, V> decoded, long epoch) {
    if (decoded.failure() == null) {
      return apply(decoded.record(), epoch);
    }
    RecordDeserializationException failure = decoded.failure();
    return apply(
        decoded.raw(),
        epoch,
        tx -> {
          throw failure;
        });
  }

  /**
   * Records {@code record}, acknowledged by the dead-letter topic, as applied: the same ownership
   * and offset checks as an apply, without the handler. {@link ApplyOutcome#DEAD_LETTERED} when the
   * row moved; {@link ApplyOutcome#FENCED} or {@link ApplyOutcome#REPLAY} when it did not.
   *
   * @throws BackendUnavailableException as {@link #apply(ConsumerRecord, long)}: whether the offset
   *     was recorded is unknown
   */
  public ApplyOutcome recordDeadLettered(ConsumerRecord<?, ?> record, long epoch) {
    ApplyOutcome outcome = apply(record, epoch, tx -> {});
    return outcome == ApplyOutcome.APPLIED ? ApplyOutcome.DEAD_LETTERED : outcome;
  }

  /** The work that runs in the transaction once the ownership update moved the row. */
  @FunctionalInterface
  private interface Work {
    void run(DSLContext tx) throws Exception;
  }

  private ApplyOutcome apply(ConsumerRecord<?, ?> record, long epoch, Work work) {
    try {
      return dsl.transactionResult(
          cfg -> {
            DSLContext tx = cfg.dsl();
            int rows =
                table.advance(
                    tx,
                    group,
                    record.topic(),
                    record.partition(),
                    record.offset(),
                    epoch,
                    owner,
                    safeguards,
                    statementTimeout,
                    idleTimeout);
            if (!SqlErrors.atMostOneRow(
                rows, "ownership update of " + where(record), table, OwnerTable.KEY)) {
              OwnerTable.Row row = table.row(tx, group, record.topic(), record.partition());
              boolean superseded = row.epoch() != epoch || !owner.equals(row.owner());
              return safeguards.epochCheck() && superseded
                  ? ApplyOutcome.FENCED
                  : ApplyOutcome.REPLAY;
            }
            try {
              work.run(tx);
            } catch (Exception e) {
              throw new HandlerFailure(e);
            }
            return ApplyOutcome.APPLIED;
          });
    } catch (HandlerFailure e) {
      throw failure(record, e.getCause());
    } catch (DataAccessException e) {
      if (SqlErrors.isTransient(e)) {
        throw unknown(record, e);
      }
      throw e;
    }
  }

  /**
   * What the handler's or deserializer's {@code cause} means ({@link RecordFailures}): a transient
   * failure to retry, or a failure for good, dead-letterable or not.
   */
  private RuntimeException failure(ConsumerRecord<?, ?> record, Throwable cause) {
    RecordFailedException.Stage stage =
        cause instanceof RecordDeserializationException failure
            ? failure.origin() == DeserializationExceptionOrigin.KEY
                ? RecordFailedException.Stage.KEY_DESERIALIZER
                : RecordFailedException.Stage.VALUE_DESERIALIZER
            : RecordFailedException.Stage.HANDLER;
    RecordFailures.Verdict verdict =
        RecordFailures.classify(cause, stage, where(record), deadLetterTopic, deadLetterWhen);
    if (verdict == RecordFailures.Verdict.RETRY) {
      return transientFailure(record, cause);
    }
    boolean poison = verdict == RecordFailures.Verdict.DEAD_LETTER;
    String mark =
        deadLetterTopic
            ? "mark such failures with OwnershipConfig's deadLetterWhen"
            : "set OwnershipConfig's deadLetterTopic, with a deadLetterWhen that marks such"
                + " failures";
    String fix =
        stage == RecordFailedException.Stage.HANDLER
            ? " A record that can never apply blocks its partition: handle it in the handler, e.g."
                + " in a dead-letter table, or "
                + mark
                + ". Any other failure: fix the cause and restart."
            : " A record that can never be read blocks its partition: fix the deserializer, or "
                + mark
                + ". Any other failure (a schema registry that failed, a deploy that changed the"
                + " format): fix the cause and restart.";
    String what =
        stage == RecordFailedException.Stage.HANDLER
            ? "The record handler"
            : "The "
                + (stage == RecordFailedException.Stage.KEY_DESERIALIZER ? "key" : "value")
                + " deserializer";
    return new RecordFailedException(
        stage,
        what + " failed on " + where(record) + " (the transaction was rolled back)." + fix,
        cause,
        poison);
  }

  private static BackendUnavailableException unknown(ConsumerRecord<?, ?> record, Throwable e) {
    return new BackendUnavailableException(
        "PostgreSQL failed while applying "
            + where(record)
            + "; whether the apply committed is unknown. Retry the same record with the same"
            + " epoch: the offset check makes the retry a replay if it had.",
        e);
  }

  private static BackendUnavailableException transientFailure(
      ConsumerRecord<?, ?> record, Throwable e) {
    return new BackendUnavailableException(
        "Applying "
            + where(record)
            + " failed transiently (a backend to retry later, a timeout, an I/O failure); the"
            + " transaction was rolled back, or its outcome is unknown. Retry the same record with"
            + " the same epoch: the offset check makes the retry a replay if it had committed.",
        e);
  }

  private static String where(ConsumerRecord<?, ?> record) {
    return record.topic() + "-" + record.partition() + "@" + record.offset();
  }

  @Override
  public String toString() {
    return "ApplyTransaction[" + table + ", group " + group + ", owner " + owner + "]";
  }

  /** The handler threw; carries its exception out of the transaction. */
  private static final class HandlerFailure extends RuntimeException {
    private static final long serialVersionUID = 1L;

    HandlerFailure(Exception cause) {
      super(cause);
    }
  }
}
