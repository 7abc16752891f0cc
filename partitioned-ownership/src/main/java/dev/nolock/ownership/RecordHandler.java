package dev.nolock.ownership;

import dev.nolock.patterns.FencingToken;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jooq.DSLContext;

/**
 * Applies one record: the state change of a command, made through the transaction that also checks
 * ownership and advances the partition's applied offset.
 *
 * <p>Called only after the transaction has checked that this runner still owns the record's
 * partition with {@code epoch} and that the record's offset has not been applied before; the change
 * commits together with the new applied offset, or not at all. Records of one partition are applied
 * one at a time, in offset order, by one thread.
 *
 * <p>Write only through {@code tx}; writes through another connection are not fenced. A write to
 * another system should carry {@code epoch} as a fencing token for that system to check (for
 * example through {@code dev.nolock.patterns.sql.Fence}, with the partition as the lock name),
 * which refuses a zombie owner, <b>and</b> be idempotent per record (keyed by {@code
 * topic-partition@offset}): a record is applied again after its transaction rolled back or its
 * {@code COMMIT} answer was lost, by the same owner with the same epoch, which the fence lets
 * through. Do not commit or roll back {@code tx} yourself. Throwing rolls the transaction back and
 * stops the runner (see the README's Error handling): a record that can never apply blocks its
 * partition, so handle poison records here (record them in a dead-letter table through {@code tx}
 * and return).
 *
 * @param <K> the key type
 * @param <V> the value type
 */
@FunctionalInterface
public interface RecordHandler<K, V> {

  void apply(ConsumerRecord<K, V> record, DSLContext tx, FencingToken epoch) throws Exception;
}
