package dev.nolock.patterns;

import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.function.UnaryOperator;

/**
 * Compare-and-swap on a version, without a lock: a writer proves it saw the latest state by naming
 * its version, and the store refuses it otherwise. Implemented on a PostgreSQL version column
 * ({@code nolock-cas-versioning}) and on a DynamoDB record version number ({@code
 * nolock-conditional-writes}); both pass testkit's {@code VersionedStoreContract} and {@code
 * VersionedStoreLostAnswerContract}.
 *
 * <p>Guarantee: a write that names version {@code v} commits only if the stored version is still
 * {@code v}, and every committed change gets a version the key has not had before, also across a
 * delete and a later insert of the same key; so of two writers that read the same version, exactly
 * one succeeds and no update is lost, and a writer holding a version from before a delete cannot
 * write the key inserted again (the ABA hazard). Where no counter survives a delete, a store draws
 * versions at random and says how unlikely a repeat is. Losing is a {@link Conflict} value carrying
 * the current version; a broken backend is a {@link BackendUnavailableException}; bad input is an
 * {@link IllegalArgumentException}.
 *
 * <p>After a lost answer (the backend may have applied a write whose answer never arrived) a store
 * reports the true outcome or {@link BackendUnavailableException}, never a conflict for a write
 * that landed; one call's write lands at most once (a resent insert must not bring back a key that
 * another writer deleted after the first send landed), and {@link #update} never applies its change
 * twice in one call. A caller that sends a write again after "unknown" may get a conflict caused by
 * its own first write: read the key.
 *
 * @param <K> the key type
 * @param <T> the value type
 */
public interface VersionedStore<K, T> {

  /** The value and its version, or empty when the key does not exist. */
  Option<Versioned<T>> read(K id);

  /** Stores a new key; a {@link Conflict} with the existing version if it already exists. */
  Either<Conflict, Versioned<T>> insert(K id, T value);

  /**
   * Replaces the value only if the stored version is still {@code expected}.
   *
   * @return the new value and version, or the conflict with the version the store holds now
   */
  Either<Conflict, Versioned<T>> compareAndSet(K id, Version expected, T newValue);

  /** Deletes the key only if the stored version is still {@code expected}. */
  Either<Conflict, Version> delete(K id, Version expected);

  /**
   * Read, apply {@code change} (a pure function: it may run several times), compare-and-set; on a
   * conflict, back off and repeat under the store's {@link RetryPolicy}. When the policy gives up,
   * returns the last conflict. A missing key is a conflict with no current version, not retried.
   */
  Either<Conflict, Versioned<T>> update(K id, UnaryOperator<T> change);
}
