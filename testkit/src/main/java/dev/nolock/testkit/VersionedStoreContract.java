package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import io.vavr.control.Either;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * The contract both versioned stores pass (a PostgreSQL version column, a DynamoDB rvn), on {@code
 * String} keys and {@code Long} values. A store's test extends it and supplies the store, a blind
 * write that ignores the version (for the negative control) and a store on a missing table.
 *
 * <p>The suite can fail: the concurrency test's negative control does the same increments as a
 * blind read-then-write and must come up short.
 */
public abstract class VersionedStoreContract {

  /** The store under test. Its {@code update} must retry with a time cap only (no attempt cap). */
  protected abstract VersionedStore<String, Long> store();

  /** Writes {@code value} under {@code id} with no version check: the negative control's write. */
  protected abstract void blindWrite(String id, long value);

  /** A store configured on a table (or DynamoDB table) that does not exist. */
  protected abstract VersionedStore<String, Long> storeOnMissingTable();

  /** The name of that missing table, which its error must mention. */
  protected abstract String missingTableName();

  /** Concurrent writers of the hot-key test. */
  protected int writers() {
    return 8;
  }

  /** Increments each writer makes in the hot-key test. */
  protected int incrementsPerWriter() {
    return 500;
  }

  private final String prefix = "c-" + UUID.randomUUID().toString().substring(0, 8) + "-";
  private final AtomicInteger ids = new AtomicInteger();

  protected String newId() {
    return prefix + ids.incrementAndGet();
  }

  @Test
  void insertThenReadReturnsTheValueWithItsVersion() {
    String id = newId();
    Versioned<Long> inserted = store().insert(id, 41L).get();

    assertThat(store().read(id).get()).isEqualTo(inserted);
    assertThat(inserted.value()).isEqualTo(41L);
  }

  @Test
  void insertingAnExistingKeyIsAConflictWithTheCurrentVersionAndChangesNothing() {
    String id = newId();
    Versioned<Long> first = store().insert(id, 1L).get();

    Conflict conflict = store().insert(id, 2L).getLeft();

    assertThat(conflict.current()).contains(first.version());
    assertThat(store().read(id).get()).isEqualTo(first);
  }

  @Test
  void aStaleCompareAndSetIsRefusedReportsTheCurrentVersionAndChangesNothing() {
    String id = newId();
    Version v1 = store().insert(id, 1L).get().version();
    Versioned<Long> v2 = store().compareAndSet(id, v1, 2L).get();

    Either<Conflict, Versioned<Long>> stale = store().compareAndSet(id, v1, 3L);

    assertThat(stale.isLeft()).as("the stale write was attempted and refused").isTrue();
    assertThat(stale.getLeft().current()).contains(v2.version());
    assertThat(store().read(id).get()).isEqualTo(v2);
  }

  @Test
  void everyChangeGetsANewVersion() {
    String id = newId();
    Versioned<Long> current = store().insert(id, 0L).get();
    Set<Version> seen = new HashSet<>(List.of(current.version()));
    for (long i = 1; i <= 5; i++) {
      current = store().compareAndSet(id, current.version(), i).get();
      assertThat(seen.add(current.version())).as("version %s is new", current.version()).isTrue();
    }
  }

  /**
   * The ABA hazard: a writer read the key, the key was deleted and inserted again, and the writer
   * now sends its compare-and-set with the version it read. If the new row ever passes through a
   * version the old one had, that writer overwrites a row it never saw. Every version of the old
   * row is tried against every version of the new one.
   */
  @Test
  void aWriterHoldingAVersionFromBeforeADeleteCannotWriteTheKeyInsertedAgain() {
    String id = newId();
    int changes = 3;
    Versioned<Long> current = store().insert(id, 0L).get();
    List<Version> oldRow = new ArrayList<>(List.of(current.version()));
    for (long i = 1; i <= changes; i++) {
      current = store().compareAndSet(id, current.version(), i).get();
      oldRow.add(current.version());
    }
    assertThat(store().delete(id, current.version()).isRight()).isTrue();

    Versioned<Long> newRow = store().insert(id, 100L).get();
    int staleAttempts = 0;
    for (long i = 1; i <= changes + 1; i++) {
      for (Version stale : oldRow) {
        Either<Conflict, Versioned<Long>> attempt = store().compareAndSet(id, stale, -1L);
        staleAttempts++;
        assertThat(attempt.isLeft())
            .as(
                "a writer holding version %s from before the delete must be refused by the row"
                    + " inserted again (now at version %s): the ABA hazard",
                stale, newRow.version())
            .isTrue();
      }
      assertThat(store().read(id).get()).isEqualTo(newRow);
      if (i <= changes) {
        newRow = store().compareAndSet(id, newRow.version(), 100L + i).get();
      }
    }
    assertThat(staleAttempts).isEqualTo((changes + 1) * oldRow.size());
  }

  @Test
  void compareAndSetOnAMissingKeyIsAConflictWithoutACurrentVersion() {
    Conflict conflict = store().compareAndSet(newId(), Version.of(1), 1L).getLeft();

    assertThat(conflict.isMissing()).isTrue();
  }

  @Test
  void deleteNeedsTheCurrentVersion() {
    String id = newId();
    Version v1 = store().insert(id, 1L).get().version();
    Version v2 = store().compareAndSet(id, v1, 2L).get().version();

    assertThat(store().delete(id, v1).getLeft().current()).contains(v2);
    assertThat(store().read(id).isDefined()).isTrue();
    assertThat(store().delete(id, v2).get()).isEqualTo(v2);
    assertThat(store().read(id).isEmpty()).isTrue();
    assertThat(store().delete(id, v2).getLeft().isMissing()).isTrue();
  }

  @Test
  void updateAppliesTheChangeToTheLatestValue() {
    String id = newId();
    store().insert(id, 10L);

    Versioned<Long> updated = store().update(id, v -> v * 3).get();

    assertThat(updated.value()).isEqualTo(30L);
    assertThat(store().read(id).get()).isEqualTo(updated);
  }

  @Test
  void updateOfAMissingKeyIsAConflictNotARetryLoop() {
    assertThat(store().update(newId(), v -> v + 1).getLeft().isMissing()).isTrue();
  }

  @Test
  void concurrentUpdatesOnOneHotKeyLoseNothing() throws Exception {
    String id = newId();
    store().insert(id, 0L);
    AtomicInteger gaveUp = new AtomicInteger();

    runConcurrently(
        () -> {
          if (store().update(id, v -> v + 1).isLeft()) {
            gaveUp.incrementAndGet();
          }
        });

    assertThat(gaveUp).as("no update gave up (the retry has a time cap only)").hasValue(0);
    assertThat(store().read(id).get().value()).isEqualTo((long) writers() * incrementsPerWriter());
  }

  @Test
  void negativeControlBlindReadThenWriteIncrementsComeUpShort() throws Exception {
    String id = newId();
    store().insert(id, 0L);

    runConcurrently(
        () -> {
          long read = store().read(id).get().value();
          LockSupport.parkNanos(200_000); // widen the read-to-write window, as a slow writer would
          blindWrite(id, read + 1);
        });

    assertThat(store().read(id).get().value())
        .as("without the version check, concurrent increments are lost")
        .isLessThan((long) writers() * incrementsPerWriter());
  }

  @Test
  void badInputIsRefusedWithAClearError() {
    assertThatThrownBy(() -> store().read(null)).hasMessageContaining("id");
    assertThatThrownBy(() -> store().insert(newId(), null)).hasMessageContaining("value");
    assertThatThrownBy(() -> store().compareAndSet(newId(), null, 1L))
        .hasMessageContaining("version");
    assertThatThrownBy(() -> storeOnMissingTable().read(newId()))
        .hasMessageContaining(missingTableName());
  }

  private void runConcurrently(Runnable increment) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(writers());
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int w = 0; w < writers(); w++) {
        futures.add(
            pool.submit(
                () -> {
                  start.await();
                  for (int i = 0; i < incrementsPerWriter(); i++) {
                    increment.run();
                  }
                  return null;
                }));
      }
      start.countDown();
      for (Future<?> f : futures) {
        f.get(10, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
    }
  }
}
