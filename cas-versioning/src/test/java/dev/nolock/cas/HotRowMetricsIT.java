package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** 8 writers × 500 increments on one hot row: the metrics show the lost races and the retries. */
@ExtendWith(PostgresExtension.class)
class HotRowMetricsIT {

  private static final int WRITERS = 8;
  private static final int INCREMENTS = 500;

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  @Test
  void aHotRowShowsConflictsAndRetriesButNoGiveUps(PostgresSchema schema) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom("counters", String.class, ValueCodec.longs())
                .retryPolicy(VersionColumnStoreIT.TIME_CAP_ONLY)
                .metrics(registry, "hot-row")
                .build());
    store.insert("hot", 0L);

    long started = System.nanoTime();
    ExecutorService pool = Executors.newFixedThreadPool(WRITERS);
    CountDownLatch start = new CountDownLatch(1);
    try {
      List<Future<Integer>> gaveUp = new ArrayList<>();
      for (int w = 0; w < WRITERS; w++) {
        gaveUp.add(
            pool.submit(
                () -> {
                  start.await();
                  int lost = 0;
                  for (int i = 0; i < INCREMENTS; i++) {
                    lost += store.update("hot", v -> v + 1).isLeft() ? 1 : 0;
                  }
                  return lost;
                }));
      }
      start.countDown();
      for (Future<Integer> f : gaveUp) {
        assertThat(f.get(10, TimeUnit.MINUTES)).isZero();
      }
    } finally {
      pool.shutdownNow();
    }
    long millis = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started);

    double attempts = count(registry, "nolock.cas.attempts");
    double conflicts = count(registry, "nolock.conflicts");
    double retries = count(registry, "nolock.cas.retries");
    double giveUps = count(registry, "nolock.cas.give_ups");
    System.out.printf(
        "hot row, %d writers x %d increments in %d ms: attempts=%.0f conflicts=%.0f retries=%.0f"
            + " give_ups=%.0f (%.0f successes/s, %.2f attempts per success)%n",
        WRITERS,
        INCREMENTS,
        millis,
        attempts,
        conflicts,
        retries,
        giveUps,
        WRITERS * INCREMENTS * 1000.0 / Math.max(1, millis),
        attempts / (WRITERS * INCREMENTS));

    assertThat(store.read("hot").get().value()).isEqualTo((long) WRITERS * INCREMENTS);
    assertThat(conflicts).as("conflicts").isPositive();
    assertThat(retries).as("retries").isPositive();
    assertThat(giveUps).as("give-ups").isZero();
    // the insert, every increment and every lost race were each one attempt; each lost race retried
    assertThat(attempts).isEqualTo(1 + WRITERS * INCREMENTS + conflicts);
    assertThat(retries).isEqualTo(conflicts);
  }

  private static double count(SimpleMeterRegistry registry, String name) {
    return registry.get(name).tag("component", "store").tag("name", "hot-row").counter().count();
  }
}
