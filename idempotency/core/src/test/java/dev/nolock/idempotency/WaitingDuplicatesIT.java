package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.awaitility.Awaitility;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Duplicates of a key in progress, with {@code waitWhileInProgress}: at most the configured number
 * of them wait (each pins a thread while it backs off); the rest are answered {@link
 * Outcome.RequestInProgress} at once, as without waiting.
 */
@ExtendWith(PostgresExtension.class)
class WaitingDuplicatesIT {

  private static final Duration LATCH_WAIT = Duration.ofSeconds(60);

  /** Long enough that no waiter takes the key over while the test holds it. */
  private static final Duration LEASE = Duration.ofMinutes(5);

  private final PostgresSchema schema;
  private final DSLContext dsl;

  WaitingDuplicatesIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
    Ledger.create(schema.dsl());
  }

  @Test
  void byDefaultSixteenDuplicatesWaitAndTheRestAreAnsweredInProgressAtOnce() throws Exception {
    int bound = IdempotencyConfig.DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS;
    SimpleMeterRegistry registry = new SimpleMeterRegistry();

    Observed observed =
        duplicatesOfAKeyInProgress(
            IdempotencyConfig.custom().metrics(registry, "waits"), bound + 4);

    assertThat(observed.waited()).isEqualTo(bound);
    assertThat(observed.answeredAtOnce())
        .hasSize(4)
        .allSatisfy(o -> assertThat(o).isInstanceOf(Outcome.RequestInProgress.class));
    assertThat(observed.waitersAfterRelease())
        .hasSize(bound)
        .containsOnly(new Outcome.Replayed<>("done"));
    assertThat(Ledger.count(dsl, "waits", observed.key())).isEqualTo(1);
    assertThat(registry.get("nolock.idempotency.waits.refused").counter().count()).isEqualTo(4);
    assertThat(registry.get("nolock.idempotency.in.progress").counter().count()).isEqualTo(4);
    assertThat(registry.get("nolock.idempotency.replays").counter().count()).isEqualTo(bound);
  }

  @Test
  void aConfiguredBoundOfTwoLetsTwoOfSevenDuplicatesWait() throws Exception {
    Observed observed =
        duplicatesOfAKeyInProgress(IdempotencyConfig.custom().maxWaitingWhileInProgress(2), 7);

    assertThat(observed.waited()).isEqualTo(2);
    assertThat(observed.answeredAtOnce())
        .hasSize(5)
        .allSatisfy(o -> assertThat(o).isInstanceOf(Outcome.RequestInProgress.class));
    assertThat(observed.waitersAfterRelease())
        .containsExactly(new Outcome.Replayed<>("done"), new Outcome.Replayed<>("done"));
  }

  /**
   * Negative control: the same twenty duplicates under the default bound, with the bound switched
   * off ({@link Safeguards#waitBound()}); every duplicate waits, so the scenario does see more
   * waiters than a bound would allow.
   */
  @Test
  void withoutTheBoundEveryDuplicateWaits() throws Exception {
    int duplicates = IdempotencyConfig.DEFAULT_MAX_WAITING_WHILE_IN_PROGRESS + 4;

    Observed observed =
        duplicatesOfAKeyInProgress(
            IdempotencyConfig.custom(), new Safeguards(true, true, false), duplicates);

    assertThat(observed.waited()).isEqualTo(duplicates);
    assertThat(observed.answeredAtOnce()).isEmpty();
    assertThat(observed.waitersAfterRelease())
        .hasSize(duplicates)
        .containsOnly(new Outcome.Replayed<>("done"));
  }

  /**
   * A waiter that is interrupted gives its permit back: with a bound of one, the next duplicate
   * waits again. Its backoff blocks until the test wakes it, so the interrupt lands in the backoff.
   */
  @Test
  void anInterruptedWaiterGivesItsPermitBack() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CountDownLatch wake = new CountDownLatch(1);
    IdempotencyKeys<String> waiting =
        waitingKeys(
            IdempotencyConfig.custom()
                .metrics(registry, "interrupted")
                .maxWaitingWhileInProgress(1),
            Safeguards.ALL,
            d -> assertThat(wake.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue());
    // Three threads (the holder, the first waiter, the refused call): the next duplicate runs on
    // the thread of one that returned, the first waiter's maybe, and still counts as backed off
    // only if it backed off itself.
    ExecutorService pool = Executors.newFixedThreadPool(3);
    Holder holder = new Holder(pool);
    try {
      Duplicate first = Duplicate.start(pool, waiting, holder.key);
      Awaitility.await().atMost(LATCH_WAIT).until(() -> first.backedOff());
      Duplicate refused = Duplicate.start(pool, waiting, holder.key);
      assertThat(refused.outcome().get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
          .isInstanceOf(Outcome.RequestInProgress.class);
      assertThat(refused.backedOff()).isFalse();

      first.thread().join().interrupt();
      assertThat(first.outcome().get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
          .isInstanceOf(Outcome.RequestInProgress.class);
      assertThat(first.interruptedAfter().get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
          .as("the interrupt is kept for the caller")
          .isTrue();

      Duplicate next = Duplicate.start(pool, waiting, holder.key);
      Awaitility.await().atMost(LATCH_WAIT).until(() -> next.answered() || next.backedOff());
      assertThat(next.backedOff()).as("the permit was given back").isTrue();
      holder.finish();
      wake.countDown();
      assertThat(next.outcome().get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
          .isEqualTo(new Outcome.Replayed<>("done"));
      assertThat(registry.get("nolock.idempotency.waits.refused").counter().count()).isEqualTo(1);
    } finally {
      wake.countDown();
      holder.finishing.countDown();
      pool.shutdownNow();
    }
  }

  /** What the duplicates did while the key was held, and what the waiters got after it. */
  record Observed(
      String key,
      int waited,
      List<Outcome<String>> answeredAtOnce,
      List<Outcome<String>> waitersAfterRelease) {}

  /**
   * Holds a key in progress (its action blocked on a latch), starts {@code duplicates} calls with
   * the key on one instance configured by {@code config} that waits while in progress, and waits
   * until each has either backed off once (it waits) or returned (it did not); then releases the
   * holder and collects the waiters' outcomes.
   */
  private Observed duplicatesOfAKeyInProgress(IdempotencyConfig.Builder config, int duplicates)
      throws Exception {
    return duplicatesOfAKeyInProgress(config, Safeguards.ALL, duplicates);
  }

  private Observed duplicatesOfAKeyInProgress(
      IdempotencyConfig.Builder config, Safeguards safeguards, int duplicates) throws Exception {
    IdempotencyKeys<String> waiting = waitingKeys(config, safeguards, LeaseClock.system()::sleep);
    ExecutorService pool = Executors.newFixedThreadPool(duplicates + 1);
    Holder holder = new Holder(pool);
    try {
      List<Duplicate> calls = new ArrayList<>();
      for (int i = 0; i < duplicates; i++) {
        calls.add(Duplicate.start(pool, waiting, holder.key));
      }
      // Each duplicate either waits (it backs off, sleeping on the clock) or answers: until all
      // have done one or the other, the count of waiters could still grow.
      Awaitility.await()
          .atMost(LATCH_WAIT)
          .until(() -> calls.stream().allMatch(c -> c.answered() || c.backedOff()));
      List<Outcome<String>> answeredAtOnce = new ArrayList<>();
      List<Duplicate> waiters = new ArrayList<>();
      for (Duplicate call : calls) {
        if (call.backedOff()) {
          waiters.add(call);
        } else {
          answeredAtOnce.add(call.outcome().get());
        }
      }
      holder.finish();
      List<Outcome<String>> afterRelease = new ArrayList<>();
      for (Duplicate waiter : waiters) {
        afterRelease.add(waiter.outcome().get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS));
      }
      return new Observed(holder.key, waiters.size(), answeredAtOnce, afterRelease);
    } finally {
      holder.finishing.countDown();
      pool.shutdownNow();
    }
  }

  /** How a backoff passes. */
  private interface Backoff {
    void sleep(Duration duration) throws InterruptedException;
  }

  /**
   * An instance that waits while the key is in progress, for as long as a test may take; its clock
   * marks the {@link Duplicate} running on the current thread as backed off, then lets {@code
   * backoff} pass.
   */
  private IdempotencyKeys<String> waitingKeys(
      IdempotencyConfig.Builder config, Safeguards safeguards, Backoff backoff) {
    LeaseClock recordingClock =
        new LeaseClock() {
          @Override
          public long nanoTime() {
            return System.nanoTime();
          }

          @Override
          public void sleep(Duration duration) throws InterruptedException {
            Duplicate.RUNNING.get().marked().set(true);
            backoff.sleep(duration);
          }
        };
    return IdempotencyKeys.withSafeguards(
        schema.dataSource(),
        config
            .lease(LEASE)
            .clock(recordingClock)
            .waitWhileInProgress(
                RetryPolicy.custom()
                    .maxAttempts(100_000)
                    .maxElapsed(Duration.ofMinutes(2))
                    .baseDelay(Duration.ofMillis(10))
                    .maxDelay(Duration.ofMillis(100))
                    .build())
            .build(),
        ResultCodec.utf8(),
        FailurePolicy.releaseOnEveryFailure(),
        safeguards);
  }

  /** A fresh key held in progress by an action blocked until {@link #finish()}. */
  private final class Holder {
    final String key = UUID.randomUUID().toString();
    final CountDownLatch finishing = new CountDownLatch(1);
    private final Future<Outcome<String>> held;

    Holder(ExecutorService pool) throws InterruptedException {
      IdempotencyKeys<String> keys =
          IdempotencyKeys.create(
              schema.dataSource(),
              IdempotencyConfig.custom().lease(LEASE).build(),
              ResultCodec.utf8());
      CountDownLatch inAction = new CountDownLatch(1);
      held =
          pool.submit(
              () ->
                  keys.execute(
                      "waits",
                      Caller.anonymous(),
                      key,
                      Fingerprint.of("f"),
                      attempt -> {
                        Ledger.write(attempt, "effect");
                        inAction.countDown();
                        assertThat(finishing.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
                            .isTrue();
                        return "done";
                      }));
      assertThat(inAction.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    }

    void finish() throws Exception {
      finishing.countDown();
      assertThat(held.get(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS))
          .isInstanceOf(Outcome.Completed.class);
    }
  }

  /**
   * One duplicate call: the thread it runs on, its outcome, whether that thread's interrupt flag
   * was set when it returned, and whether this call (not another that ran on the same pool thread)
   * backed off.
   */
  private record Duplicate(
      CompletableFuture<Thread> thread,
      CompletableFuture<Outcome<String>> outcome,
      CompletableFuture<Boolean> interruptedAfter,
      AtomicBoolean marked) {

    /** The call running on this thread, for the clock to mark: set for exactly its duration. */
    static final ThreadLocal<Duplicate> RUNNING = new ThreadLocal<>();

    static Duplicate start(ExecutorService pool, IdempotencyKeys<String> keys, String key) {
      Duplicate call =
          new Duplicate(
              new CompletableFuture<>(),
              new CompletableFuture<>(),
              new CompletableFuture<>(),
              new AtomicBoolean());
      pool.submit(
          () -> {
            call.thread().complete(Thread.currentThread());
            RUNNING.set(call);
            try {
              call.outcome()
                  .complete(
                      keys.execute(
                          "waits",
                          Caller.anonymous(),
                          key,
                          Fingerprint.of("f"),
                          attempt -> {
                            throw new AssertionError("a duplicate must not run the action");
                          }));
            } catch (RuntimeException | Error e) {
              call.outcome().completeExceptionally(e);
            } finally {
              RUNNING.remove();
            }
            call.interruptedAfter().complete(Thread.currentThread().isInterrupted());
          });
      return call;
    }

    boolean answered() {
      return outcome.isDone();
    }

    boolean backedOff() {
      return marked.get();
    }
  }
}
