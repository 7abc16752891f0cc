package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The batch compare-and-set: one transaction, an outcome per row. */
@ExtendWith(PostgresExtension.class)
class CompareAndSetAllIT {

  private static final String TABLE = "counters";

  private final DSLContext dsl;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final VersionColumnStore<String, Long> store;
  private final String prefix = "b-" + UUID.randomUUID().toString().substring(0, 8) + "-";
  private final Map<String, Version> inserted = new HashMap<>();

  CompareAndSetAllIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
    this.store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
                .metrics(registry, "batch")
                .build());
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  private List<String> insertRows(int count) {
    List<String> ids = new ArrayList<>();
    for (int i = 1; i <= count; i++) {
      String id = prefix + UUID.randomUUID().toString().substring(0, 8) + "-" + i;
      inserted.put(id, store.insert(id, (long) i).get().version());
      ids.add(id);
    }
    return ids;
  }

  /** The version {@code id} got from its insert. */
  private Version first(String id) {
    return inserted.get(id);
  }

  /** The version after one change since the insert. */
  private Version second(String id) {
    return Version.of(first(id).asLong() + 1);
  }

  @Test
  void ofFiveRowsTheTwoStaleOnesAreConflictsWithTheirCurrentVersionsAndTheOthersAreWritten() {
    List<String> ids = insertRows(5);
    Tables.bumpBehindTheStoresBack(dsl, TABLE, ids.get(1)); // rows 2 and 4 move on
    Tables.bumpBehindTheStoresBack(dsl, TABLE, ids.get(3));
    double conflictsBefore = count("nolock.conflicts");
    List<VersionedWrite<String, Long>> writes = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      writes.add(VersionedWrite.of(ids.get(i), first(ids.get(i)), 10L * (i + 1)));
    }

    List<Either<Conflict, Versioned<Long>>> outcomes = store.compareAndSetAll(writes);

    assertThat(outcomes).hasSize(5);
    for (int i : List.of(0, 2, 4)) {
      Versioned<Long> written = new Versioned<>(10L * (i + 1), second(ids.get(i)));
      assertThat(outcomes.get(i)).isEqualTo(Either.right(written));
      assertThat(store.read(ids.get(i)).get()).isEqualTo(written);
    }
    for (int i : List.of(1, 3)) {
      assertThat(outcomes.get(i).getLeft())
          .isEqualTo(new Conflict(ids.get(i), io.vavr.control.Option.of(second(ids.get(i)))));
      assertThat(store.read(ids.get(i)).get())
          .as("a stale row is left as the other writer made it")
          .isEqualTo(new Versioned<>(i + 1 + 100L, second(ids.get(i))));
    }
    assertThat(count("nolock.conflicts") - conflictsBefore).isEqualTo(2);
  }

  @Test
  void outcomesFollowTheOrderOfTheWritesNotOfTheKeys() {
    List<String> ids = insertRows(4);
    List<String> reversed = new ArrayList<>(ids);
    Collections.reverse(reversed);

    List<Either<Conflict, Versioned<Long>>> outcomes =
        store.compareAndSetAll(
            reversed.stream()
                .map(id -> VersionedWrite.of(id, first(id), (long) id.length()))
                .toList());

    for (int i = 0; i < reversed.size(); i++) {
      assertThat(outcomes.get(i).get().value()).isEqualTo((long) reversed.get(i).length());
      assertThat(store.read(reversed.get(i)).get().value())
          .isEqualTo((long) reversed.get(i).length());
    }
  }

  @Test
  void aMissingKeyIsAConflictWithoutAVersionAndDoesNotStopTheOthers() {
    String present = insertRows(1).get(0);
    String missing = prefix + "missing";

    List<Either<Conflict, Versioned<Long>>> outcomes =
        store.compareAndSetAll(
            List.of(
                VersionedWrite.of(missing, Version.of(1), 1L),
                VersionedWrite.of(present, first(present), 2L)));

    assertThat(outcomes.get(0).getLeft().isMissing()).isTrue();
    assertThat(outcomes.get(1).get()).isEqualTo(new Versioned<>(2L, second(present)));
    assertThat(store.read(missing)).isEmpty();
  }

  @Test
  void anEmptyBatchTouchesNothing() {
    assertThat(store.compareAndSetAll(List.of())).isEmpty();
  }

  @Test
  void duplicateKeysTooManyWritesAndNullsAreRefused() {
    String id = prefix + "dup";
    List<VersionedWrite<String, Long>> duplicates =
        List.of(VersionedWrite.of(id, Version.of(1), 1L), VersionedWrite.of(id, Version.of(2), 2L));
    List<VersionedWrite<String, Long>> tooMany =
        IntStream.range(0, VersionColumnStore.MAX_BATCH_SIZE + 1)
            .mapToObj(i -> VersionedWrite.of(prefix + i, Version.of(1), 1L))
            .toList();
    List<VersionedWrite<String, Long>> withNull = new ArrayList<>();
    withNull.add(null);

    assertThatThrownBy(() -> store.compareAndSetAll(duplicates))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(id)
        .hasMessageContaining("more than once");
    assertThatThrownBy(() -> store.compareAndSetAll(tooMany))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("split it");
    assertThatThrownBy(() -> store.compareAndSetAll(withNull))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> VersionedWrite.of(id, null, 1L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("expected version");
  }

  @Test
  void concurrentBatchesOverTheSameKeysInShuffledOrdersNeitherDeadlockNorLoseAWrite()
      throws Exception {
    List<String> ids = insertRows(10);
    long before = sum(ids);
    int threads = 4;
    int rounds = 40;
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<Integer>> written = new ArrayList<>();
      for (int t = 0; t < threads; t++) {
        written.add(
            pool.submit(
                () -> {
                  start.await();
                  int successes = 0;
                  for (int r = 0; r < rounds; r++) {
                    List<String> order = new ArrayList<>(ids);
                    Collections.shuffle(order, ThreadLocalRandom.current());
                    List<VersionedWrite<String, Long>> writes = new ArrayList<>();
                    for (String id : order) {
                      Versioned<Long> current = store.read(id).get();
                      writes.add(VersionedWrite.of(id, current.version(), current.value() + 1));
                    }
                    successes +=
                        (int)
                            store.compareAndSetAll(writes).stream().filter(Either::isRight).count();
                  }
                  return successes;
                }));
      }
      start.countDown();
      int successes = 0;
      for (Future<Integer> f : written) {
        successes += f.get(5, TimeUnit.MINUTES);
      }

      assertThat(successes).as("some writes won").isPositive();
      assertThat(sum(ids) - before)
          .as("every reported success, and only those, took effect")
          .isEqualTo(successes);
    } finally {
      pool.shutdownNow();
    }
  }

  private long sum(List<String> ids) {
    return ids.stream().mapToLong(id -> store.read(id).get().value()).sum();
  }

  private double count(String name) {
    return registry.get(name).tag("component", "store").tag("name", "batch").counter().count();
  }
}
