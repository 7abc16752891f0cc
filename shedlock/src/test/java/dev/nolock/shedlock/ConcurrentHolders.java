package dev.nolock.shedlock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;

/**
 * Many threads, spread over several providers (as over several nodes), ask for one lock until it
 * was granted {@code grantsWanted} times, and count how many hold it at once.
 *
 * <p>A holder keeps the lock until it saw another thread refused while it held it, or another
 * thread holding it beside it (or the others stopped: enough grants, or one failed): so a provider
 * that grants twice shows it every time, whatever the timing, and a correct one is shown to have
 * refused someone during its grants.
 */
final class ConcurrentHolders {

  record Result(int maxConcurrent, int grants, int refusals) {}

  private ConcurrentHolders() {}

  static Result run(List<? extends LockProvider> providers, String name, int threads, int wanted)
      throws Exception {
    AtomicInteger concurrent = new AtomicInteger();
    AtomicInteger max = new AtomicInteger();
    AtomicInteger grants = new AtomicInteger();
    AtomicInteger refusals = new AtomicInteger();
    AtomicBoolean failed = new AtomicBoolean();
    CountDownLatch start = new CountDownLatch(1);
    ExecutorService pool = Executors.newFixedThreadPool(threads);
    try {
      List<Future<?>> running = new ArrayList<>();
      for (int i = 0; i < threads; i++) {
        LockProvider provider = providers.get(i % providers.size());
        running.add(
            pool.submit(
                () -> {
                  start.await();
                  try {
                    hold(provider, name, wanted, concurrent, max, grants, refusals, failed);
                  } catch (RuntimeException | Error e) {
                    failed.set(true);
                    throw e;
                  }
                  return null;
                }));
      }
      start.countDown();
      for (Future<?> thread : running) {
        thread.get();
      }
    } finally {
      pool.shutdownNow();
    }
    return new Result(max.get(), grants.get(), refusals.get());
  }

  private static void hold(
      LockProvider provider,
      String name,
      int wanted,
      AtomicInteger concurrent,
      AtomicInteger max,
      AtomicInteger grants,
      AtomicInteger refusals,
      AtomicBoolean failed) {
    while (grants.get() < wanted && !failed.get()) {
      Optional<SimpleLock> lock = provider.lock(config(name));
      if (lock.isEmpty()) {
        refusals.incrementAndGet();
        continue;
      }
      int refusedBefore = refusals.get();
      max.accumulateAndGet(concurrent.incrementAndGet(), Math::max);
      await()
          .atMost(Duration.ofSeconds(30))
          .pollDelay(Duration.ZERO)
          .pollInterval(Duration.ofMillis(1))
          .until(
              () ->
                  refusals.get() > refusedBefore
                      || concurrent.get() > 1
                      || grants.get() >= wanted
                      || failed.get());
      max.accumulateAndGet(concurrent.get(), Math::max);
      grants.incrementAndGet();
      concurrent.decrementAndGet();
      lock.get().unlock();
    }
  }

  /** What mutual exclusion means here: one holder at a time, with real contention. */
  static void assertMutualExclusion(Result result, int wanted) {
    assertThat(result.maxConcurrent()).as("most holders at once").isEqualTo(1);
    assertThat(result.grants()).as("grants").isGreaterThanOrEqualTo(wanted);
    assertThat(result.refusals()).as("refusals while held").isPositive();
  }

  private static LockConfiguration config(String name) {
    return new LockConfiguration(Instant.now(), name, Duration.ofSeconds(30), Duration.ZERO);
  }
}
