package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * 100 concurrent requests with one key, on the real PostgreSQL: the side effect (a ledger row, in a
 * table with no unique key on the idempotency key) happens once.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentDuplicatesIT {

  private static final int CALLERS = 100;

  @Test
  void hundredConcurrentRequestsWithOneKeyHaveOneEffectAndThenAllReplayTheSameResult(
      PostgresSchema schema) throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().metrics(registry, "duplicates").build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
    Ledger.create(schema.dsl());
    String key = UUID.randomUUID().toString();
    AtomicInteger runs = new AtomicInteger();
    // The one caller that runs the action holds it open until all others have answered, so that
    // every other caller provably arrived while the key was in progress.
    CountDownLatch othersAnswered = new CountDownLatch(CALLERS - 1);
    IdempotentAction<String, RuntimeException> pay =
        attempt -> {
          runs.incrementAndGet();
          Ledger.write(attempt, "payment");
          try {
            othersAnswered.await(60, TimeUnit.SECONDS);
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
          return "paid 100 EUR, attempt " + attempt.token().value();
        };
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(CALLERS);
    try {
      List<Future<Outcome<String>>> firstWave = new ArrayList<>();
      for (int i = 0; i < CALLERS; i++) {
        firstWave.add(
            pool.submit(
                () -> {
                  start.await();
                  Outcome<String> outcome =
                      keys.execute(
                          "payments", Caller.anonymous(), key, Fingerprint.of("pay 100 EUR"), pay);
                  if (!(outcome instanceof Outcome.Completed<String>)) {
                    othersAnswered.countDown();
                  }
                  return outcome;
                }));
      }
      start.countDown();
      List<Outcome<String>> first = collect(firstWave);

      List<Outcome.Completed<String>> completed =
          first.stream()
              .filter(o -> o instanceof Outcome.Completed<String>)
              .map(o -> (Outcome.Completed<String>) o)
              .toList();
      assertThat(completed).hasSize(1);
      assertThat(first)
          .filteredOn(o -> !(o instanceof Outcome.Completed<String>))
          .hasSize(CALLERS - 1)
          .allSatisfy(o -> assertThat(o).isInstanceOf(Outcome.RequestInProgress.class));
      String result = completed.get(0).result();

      List<Callable<Outcome<String>>> secondWave = new ArrayList<>();
      for (int i = 0; i < CALLERS; i++) {
        secondWave.add(
            () ->
                keys.execute(
                    "payments", Caller.anonymous(), key, Fingerprint.of("pay 100 EUR"), pay));
      }
      List<Outcome<String>> second = collect(pool.invokeAll(secondWave));

      assertThat(second).hasSize(CALLERS).containsOnly(new Outcome.Replayed<>(result));
      assertThat(runs).hasValue(1);
      assertThat(Ledger.count(schema.dsl(), "payments", key)).isEqualTo(1);
      assertThat(registry.get("nolock.idempotency.in.progress").counter().count())
          .isEqualTo(CALLERS - 1);
      assertThat(registry.get("nolock.idempotency.replays").counter().count()).isEqualTo(CALLERS);
    } finally {
      pool.shutdownNow();
    }
  }

  private static <T> List<T> collect(List<Future<T>> futures) throws Exception {
    List<T> results = new ArrayList<>();
    for (Future<T> future : futures) {
      results.add(future.get(Duration.ofSeconds(90).toSeconds(), TimeUnit.SECONDS));
    }
    return results;
  }
}
