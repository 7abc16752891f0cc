package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The core call against the real PostgreSQL, in one JVM. */
@ExtendWith(PostgresExtension.class)
class IdempotencyKeysIT {

  private static final Duration LATCH_WAIT = Duration.ofSeconds(30);

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();

  IdempotencyKeysIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
    Ledger.create(schema.dsl());
  }

  private IdempotencyKeys<String> keys(IdempotencyConfig.Builder config) {
    return IdempotencyKeys.create(
        schema.dataSource(), config.metrics(registry, "keys-it").build(), ResultCodec.utf8());
  }

  private IdempotencyKeys<String> keys() {
    return keys(IdempotencyConfig.custom());
  }

  private static String newKey() {
    return UUID.randomUUID().toString();
  }

  private double counter(String name, String scope) {
    return registry
        .get("nolock.idempotency." + name)
        .tag("name", "keys-it")
        .tag("scope", scope)
        .counter()
        .count();
  }

  @Test
  void theFirstRequestRunsTheActionAndRepeatsReplayItsStoredResult() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    AtomicInteger runs = new AtomicInteger();
    IdempotentAction<String, RuntimeException> charge =
        attempt -> {
          runs.incrementAndGet();
          Ledger.write(attempt, "charge");
          return "charged 100 by attempt " + attempt.token().value();
        };

    Outcome<String> first =
        keys.execute("payments", Caller.anonymous(), key, Fingerprint.of("amount=100"), charge);
    Outcome<String> second =
        keys.execute("payments", Caller.anonymous(), key, Fingerprint.of("amount=100"), charge);
    Outcome<String> third =
        keys.execute("payments", Caller.anonymous(), key, Fingerprint.of("amount=100"), charge);

    assertThat(first).isInstanceOf(Outcome.Completed.class);
    assertThat(first.replayed()).isFalse();
    String result = ((Outcome.Completed<String>) first).result();
    assertThat(second).isEqualTo(new Outcome.Replayed<>(result));
    assertThat(third).isEqualTo(new Outcome.Replayed<>(result));
    assertThat(second.replayed()).isTrue();
    assertThat(runs).hasValue(1);
    assertThat(Ledger.count(dsl, "payments", key)).isEqualTo(1);
    assertThat(counter("first.runs", "payments")).isGreaterThanOrEqualTo(1);
    assertThat(counter("replays", "payments")).isGreaterThanOrEqualTo(2);
  }

  @Test
  void theSameKeyInAnotherScopeIsAnotherRequest() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();

    Outcome<String> a =
        keys.execute("scope-a", Caller.anonymous(), key, Fingerprint.of("x"), attempt -> "a");
    Outcome<String> b =
        keys.execute("scope-b", Caller.anonymous(), key, Fingerprint.of("x"), attempt -> "b");

    assertThat(a).isInstanceOf(Outcome.Completed.class);
    assertThat(b).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) b).result()).isEqualTo("b");
  }

  @Test
  void aKeyReusedWithADifferentFingerprintIsRefusedAndNothingRuns() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    keys.execute(
        "refunds",
        Caller.anonymous(),
        key,
        Fingerprint.of("amount=100"),
        attempt -> {
          Ledger.write(attempt, "refund 100");
          return "refunded 100";
        });
    AtomicInteger secondRuns = new AtomicInteger();

    Outcome<String> reused =
        keys.execute(
            "refunds",
            Caller.anonymous(),
            key,
            Fingerprint.of("amount=50"),
            attempt -> {
              secondRuns.incrementAndGet();
              Ledger.write(attempt, "refund 50");
              return "refunded 50";
            });

    assertThat(reused).isInstanceOf(Outcome.KeyReusedWithDifferentRequest.class);
    assertThat(secondRuns).hasValue(0);
    assertThat(Ledger.rows(dsl, "refunds", key))
        .extracting(Ledger.Row::step)
        .containsExactly("refund 100");
    assertThat(counter("fingerprint.mismatches", "refunds")).isEqualTo(1);
  }

  @Test
  void aRepeatWhileTheFirstIsInProgressGetsRequestInProgressWithTheLeaseLeft() throws Exception {
    IdempotencyKeys<String> keys = keys(IdempotencyConfig.custom().lease(Duration.ofSeconds(30)));
    String key = newKey();
    CountDownLatch inAction = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<Outcome<String>> first =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    "orders",
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("o"),
                    attempt -> {
                      Ledger.write(attempt, "order");
                      inAction.countDown();
                      await(finish);
                      return "ordered";
                    }));
    assertThat(inAction.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();

    Outcome<String> repeat =
        keys.execute(
            "orders",
            Caller.anonymous(),
            key,
            Fingerprint.of("o"),
            attempt -> {
              throw new AssertionError("the repeat must not run while the first is in progress");
            });
    finish.countDown();

    assertThat(repeat).isInstanceOf(Outcome.RequestInProgress.class);
    Duration retryAfter = ((Outcome.RequestInProgress<String>) repeat).retryAfter();
    assertThat(retryAfter).isPositive().isLessThanOrEqualTo(Duration.ofSeconds(30));
    assertThat(first.get(30, TimeUnit.SECONDS)).isInstanceOf(Outcome.Completed.class);
    assertThat(Ledger.count(dsl, "orders", key)).isEqualTo(1);
    assertThat(counter("in.progress", "orders")).isEqualTo(1);
  }

  @Test
  void aCallerThatAsksToWaitReceivesTheReplayOnceTheFirstCompletes() throws Exception {
    String key = newKey();
    CountDownLatch inAction = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    IdempotencyKeys<String> first = keys();
    CountDownLatch waiterBackedOff = new CountDownLatch(1);
    LeaseClock countingClock =
        new LeaseClock() {
          @Override
          public long nanoTime() {
            return System.nanoTime();
          }

          @Override
          public void sleep(Duration duration) throws InterruptedException {
            waiterBackedOff.countDown();
            LeaseClock.super.sleep(duration);
          }
        };
    IdempotencyKeys<String> waiting =
        keys(
            IdempotencyConfig.custom()
                .clock(countingClock)
                .waitWhileInProgress(
                    RetryPolicy.custom()
                        .maxAttempts(1000)
                        .maxElapsed(Duration.ofSeconds(30))
                        .baseDelay(Duration.ofMillis(10))
                        .maxDelay(Duration.ofMillis(200))
                        .build()));
    CompletableFuture<Outcome<String>> running =
        CompletableFuture.supplyAsync(
            () ->
                first.execute(
                    "quotes",
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("q"),
                    attempt -> {
                      Ledger.write(attempt, "quote");
                      inAction.countDown();
                      await(finish);
                      return "quote 7";
                    }));
    assertThat(inAction.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();

    CompletableFuture<Outcome<String>> waiter =
        CompletableFuture.supplyAsync(
            () ->
                waiting.execute(
                    "quotes",
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("q"),
                    attempt -> {
                      throw new AssertionError("the waiter must not run the action");
                    }));
    assertThat(waiterBackedOff.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();
    finish.countDown();

    assertThat(running.get(30, TimeUnit.SECONDS)).isInstanceOf(Outcome.Completed.class);
    assertThat(waiter.get(30, TimeUnit.SECONDS)).isEqualTo(new Outcome.Replayed<>("quote 7"));
    assertThat(Ledger.count(dsl, "quotes", key)).isEqualTo(1);
  }

  @Test
  void aRetryTakesOverAnExpiredLeaseAndTheStaleAttemptsEffectIsRolledBack() throws Exception {
    IdempotencyKeys<String> keys = keys(IdempotencyConfig.custom().lease(Duration.ofSeconds(1)));
    String key = newKey();
    CountDownLatch inAction = new CountDownLatch(1);
    CountDownLatch wakeUp = new CountDownLatch(1);
    AtomicInteger staleReturned = new AtomicInteger();
    CompletableFuture<Outcome<String>> slow =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    "transfers",
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("t"),
                    attempt -> {
                      Ledger.write(attempt, "transfer");
                      inAction.countDown();
                      await(wakeUp); // "paused" past its 1 s lease
                      staleReturned.incrementAndGet();
                      return "transferred by " + attempt.token().value();
                    }));
    assertThat(inAction.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)).isTrue();

    List<Outcome<String>> retries = new ArrayList<>();
    Awaitility.await("a retry takes the key over after the lease")
        .atMost(Duration.ofSeconds(20))
        .pollInterval(Duration.ofMillis(100))
        .until(
            () -> {
              Outcome<String> outcome =
                  keys.execute(
                      "transfers",
                      Caller.anonymous(),
                      key,
                      Fingerprint.of("t"),
                      attempt -> {
                        Ledger.write(attempt, "transfer");
                        return "transferred by " + attempt.token().value();
                      });
              retries.add(outcome);
              return outcome instanceof Outcome.Completed<String>;
            });
    wakeUp.countDown();
    Outcome<String> stale = slow.get(30, TimeUnit.SECONDS);

    Outcome.Completed<String> takeover =
        (Outcome.Completed<String>) retries.get(retries.size() - 1);
    assertThat(staleReturned).as("the stale attempt reached its store").hasValue(1);
    assertThat(stale).isInstanceOf(Outcome.StaleAttempt.class);
    Outcome.StaleAttempt<String> refused = (Outcome.StaleAttempt<String>) stale;
    assertThat(takeover.attempt().isNewerThan(refused.attempt())).isTrue();
    assertThat(Ledger.rows(dsl, "transfers", key))
        .containsExactly(new Ledger.Row("transfer", takeover.attempt().value()));
    assertThat(
            keys.execute(
                "transfers", Caller.anonymous(), key, Fingerprint.of("t"), attempt -> "never"))
        .isEqualTo(new Outcome.Replayed<>(takeover.result()));
    assertThat(counter("takeovers", "transfers")).isEqualTo(1);
    assertThat(counter("stale.attempts", "transfers")).isEqualTo(1);
  }

  /** A failure the payment provider gives on every retry. */
  static final class DeclinedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    DeclinedException(String message) {
      super(message);
    }
  }

  @Test
  void aFinalFailureIsStoredAndReplayedAndItsEffectsAreRolledBack() {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().metrics(registry, "keys-it").build(),
            ResultCodec.utf8(),
            FailurePolicy.finalFor(DeclinedException.class, e -> "declined: " + e.getMessage()));
    String key = newKey();
    AtomicInteger runs = new AtomicInteger();
    IdempotentAction<String, RuntimeException> charge =
        attempt -> {
          runs.incrementAndGet();
          Ledger.write(attempt, "charge");
          throw new DeclinedException("insufficient funds");
        };

    Outcome<String> first =
        keys.execute("cards", Caller.anonymous(), key, Fingerprint.of("c"), charge);
    Outcome<String> repeat =
        keys.execute("cards", Caller.anonymous(), key, Fingerprint.of("c"), charge);

    assertThat(first).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) first).result())
        .isEqualTo("declined: insufficient funds");
    assertThat(repeat).isEqualTo(new Outcome.Replayed<>("declined: insufficient funds"));
    assertThat(runs).hasValue(1);
    assertThat(Ledger.count(dsl, "cards", key)).isZero();
  }

  @Test
  void aRetryableFailureReleasesTheKeyAndTheNextRequestRunsAtOnceWithAHigherToken() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    AtomicInteger runs = new AtomicInteger();
    IdempotentAction<String, RuntimeException> flaky =
        attempt -> {
          Ledger.write(attempt, "ship");
          if (runs.incrementAndGet() == 1) {
            throw new IllegalStateException("carrier timed out");
          }
          return "shipped by attempt " + attempt.number();
        };

    assertThatThrownBy(
            () -> keys.execute("shipping", Caller.anonymous(), key, Fingerprint.of("s"), flaky))
        .isInstanceOf(IllegalStateException.class)
        .hasMessage("carrier timed out");
    Outcome<String> retry =
        keys.execute("shipping", Caller.anonymous(), key, Fingerprint.of("s"), flaky);

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("shipped by attempt 2");
    assertThat(Ledger.count(dsl, "shipping", key)).isEqualTo(1);
    assertThat(counter("releases", "shipping")).isEqualTo(1);
    assertThat(counter("takeovers", "shipping")).isEqualTo(1);
  }

  @Test
  void phasesResumeAfterTheLastCommittedPhaseWhenALaterPhaseFails() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    AtomicInteger phase2Runs = new AtomicInteger();
    List<String> resumedFrom = new ArrayList<>();
    Phases<String, RuntimeException> phases =
        LedgerPhases.of(
            attempt -> {},
            attempt -> {
              resumedFrom.add(attempt.resumedFrom());
              if (phase2Runs.incrementAndGet() == 1) {
                throw new IllegalStateException("bank unavailable");
              }
            });

    assertThatThrownBy(
            () -> keys.execute("phased", Caller.anonymous(), key, Fingerprint.of("p"), phases))
        .hasMessage("bank unavailable");
    Outcome<String> retry =
        keys.execute("phased", Caller.anonymous(), key, Fingerprint.of("p"), phases);

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(resumedFrom).containsExactly(Phases.STARTED, LedgerPhases.PHASE_1);
    assertThat(Ledger.rows(dsl, "phased", key))
        .extracting(Ledger.Row::step)
        .containsExactly(LedgerPhases.PHASE_1, LedgerPhases.PHASE_2, LedgerPhases.PHASE_3);
  }

  @Test
  void aCheckedExceptionOfTheActionReachesTheCallerAsTheSameInstanceAndReleasesTheKey()
      throws Exception {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    IOException timedOut = new IOException("carrier timed out");
    AtomicInteger runs = new AtomicInteger();
    IdempotentAction<String, IOException> ship =
        attempt -> {
          Ledger.write(attempt, "ship");
          if (runs.incrementAndGet() == 1) {
            throw timedOut;
          }
          return "shipped by attempt " + attempt.number();
        };

    assertThatThrownBy(
            () -> keys.execute("checked", Caller.anonymous(), key, Fingerprint.of("s"), ship))
        .isSameAs(timedOut);
    assertThat(Ledger.count(dsl, "checked", key)).as("the failed attempt's write").isZero();
    Outcome<String> retry =
        keys.execute("checked", Caller.anonymous(), key, Fingerprint.of("s"), ship);

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("shipped by attempt 2");
    assertThat(Ledger.count(dsl, "checked", key)).isEqualTo(1);
    assertThat(counter("releases", "checked")).isEqualTo(1);
    assertThat(counter("takeovers", "checked")).isEqualTo(1);
  }

  @Test
  void aCheckedExceptionTheFailurePolicyMakesFinalIsStoredAndReplayed() throws Exception {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().metrics(registry, "keys-it").build(),
            ResultCodec.utf8(),
            FailurePolicy.finalFor(
                ManifestRejectedException.class, e -> "refused: " + e.getMessage()));
    String key = newKey();
    AtomicInteger runs = new AtomicInteger();
    IdempotentAction<String, ManifestRejectedException> load =
        attempt -> {
          runs.incrementAndGet();
          Ledger.write(attempt, "load");
          throw new ManifestRejectedException("no such manifest");
        };

    Outcome<String> first =
        keys.execute("manifests", Caller.anonymous(), key, Fingerprint.of("m"), load);
    Outcome<String> repeat =
        keys.execute("manifests", Caller.anonymous(), key, Fingerprint.of("m"), load);

    assertThat(first).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) first).result()).isEqualTo("refused: no such manifest");
    assertThat(repeat).isEqualTo(new Outcome.Replayed<>("refused: no such manifest"));
    assertThat(runs).hasValue(1);
    assertThat(Ledger.count(dsl, "manifests", key)).isZero();

    // Control: a checked exception of another type is not final under this policy.
    String otherKey = newKey();
    TimeoutException slow = new TimeoutException("manifest service slow");
    IdempotentAction<String, TimeoutException> timesOut =
        attempt -> {
          Ledger.write(attempt, "load");
          throw slow;
        };
    assertThatThrownBy(
            () ->
                keys.execute(
                    "manifests", Caller.anonymous(), otherKey, Fingerprint.of("m"), timesOut))
        .isSameAs(slow);
    assertThat(counter("releases", "manifests")).isEqualTo(1);
    assertThat(Ledger.count(dsl, "manifests", otherKey)).isZero();
  }

  /** A refusal that every retry would meet again: final by the policy, and checked. */
  private static final class ManifestRejectedException extends Exception {
    private static final long serialVersionUID = 1L;

    ManifestRejectedException(String message) {
      super(message);
    }
  }

  @Test
  void anInterruptIsNeverStoredAsFinalTheKeyIsReleasedAndTheFlagKept() throws Exception {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().metrics(registry, "keys-it").build(),
            ResultCodec.utf8(),
            FailurePolicy.finalFor(Exception.class, e -> "failed for good"));
    String key = newKey();
    InterruptedException stop = new InterruptedException("shutting down");
    IdempotentAction<String, InterruptedException> interrupted =
        attempt -> {
          Ledger.write(attempt, "stopping");
          throw stop;
        };

    assertThatThrownBy(
            () ->
                keys.execute("stopping", Caller.anonymous(), key, Fingerprint.of("s"), interrupted))
        .isSameAs(stop);
    assertThat(Thread.interrupted()).as("the interrupt flag, kept (and cleared here)").isTrue();
    assertThat(counter("releases", "stopping")).isEqualTo(1);
    assertThat(Ledger.count(dsl, "stopping", key)).isZero();
    // Control: the same policy stores any other exception for good.
    Outcome<String> retried =
        keys.execute(
            "stopping",
            Caller.anonymous(),
            key,
            Fingerprint.of("s"),
            attempt -> {
              throw new IllegalStateException("broken");
            });
    assertThat(retried).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retried).result()).isEqualTo("failed for good");
  }

  @Test
  void aPolicyThatRethrowsTheFailureItWasGivenStillReleasesTheKeyAndRethrowsIt() {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().metrics(registry, "keys-it").build(),
            ResultCodec.utf8(),
            failure -> {
              throw (RuntimeException) failure;
            });
    String key = newKey();
    IllegalStateException broken = new IllegalStateException("broken");

    assertThatThrownBy(
            () ->
                keys.execute(
                    "rethrowing",
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("r"),
                    attempt -> {
                      throw broken;
                    }))
        .isSameAs(broken);
    assertThat(counter("releases", "rethrowing")).isEqualTo(1);
  }

  @Test
  void aCheckedExceptionInAPhaseKeepsTheLastCommittedRecoveryPointAndTheRetryResumesThere()
      throws Exception {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    IOException bankDown = new IOException("bank unavailable");
    AtomicInteger phase2Runs = new AtomicInteger();
    List<String> resumedFrom = new ArrayList<>();
    Phases<String, IOException> phases =
        Phases.builder(IOException.class)
            .phase(LedgerPhases.PHASE_1, attempt -> Ledger.write(attempt, LedgerPhases.PHASE_1))
            .phase(
                LedgerPhases.PHASE_2,
                attempt -> {
                  resumedFrom.add(attempt.resumedFrom());
                  Ledger.write(attempt, LedgerPhases.PHASE_2);
                  if (phase2Runs.incrementAndGet() == 1) {
                    throw bankDown;
                  }
                })
            .finish(
                attempt -> {
                  Ledger.write(attempt, LedgerPhases.PHASE_3);
                  return "done by attempt " + attempt.number();
                });

    assertThatThrownBy(
            () ->
                keys.execute(
                    "checked-phases", Caller.anonymous(), key, Fingerprint.of("p"), phases))
        .isSameAs(bankDown);
    assertThat(Ledger.rows(dsl, "checked-phases", key))
        .as("phase 1 committed, phase 2 rolled back")
        .extracting(Ledger.Row::step)
        .containsExactly(LedgerPhases.PHASE_1);
    Outcome<String> retry =
        keys.execute("checked-phases", Caller.anonymous(), key, Fingerprint.of("p"), phases);

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("done by attempt 2");
    assertThat(resumedFrom).containsExactly(Phases.STARTED, LedgerPhases.PHASE_1);
    assertThat(Ledger.rows(dsl, "checked-phases", key))
        .extracting(Ledger.Row::step)
        .containsExactly(LedgerPhases.PHASE_1, LedgerPhases.PHASE_2, LedgerPhases.PHASE_3);
  }

  @Test
  void aDatabaseErrorRaisedByTheActionIsTheActionsFailureNotAnOutage() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    AtomicInteger runs = new AtomicInteger();
    AtomicReference<DataAccessException> raised = new AtomicReference<>();
    IdempotentAction<String, RuntimeException> divide =
        attempt -> {
          Ledger.write(attempt, "divide");
          if (runs.incrementAndGet() == 1) {
            try {
              attempt.dsl().execute("SELECT 1 / 0");
            } catch (DataAccessException e) {
              raised.set(e);
              throw e;
            }
          }
          return "divided by attempt " + attempt.number();
        };

    Throwable thrown =
        catchThrowable(
            () -> keys.execute("divide", Caller.anonymous(), key, Fingerprint.of("d"), divide));

    assertThat(thrown)
        .as("the action's own DataAccessException, not BackendUnavailableException")
        .isNotNull()
        .isSameAs(raised.get());
    assertThat(counter("releases", "divide")).isEqualTo(1);
    Outcome<String> retry =
        keys.execute("divide", Caller.anonymous(), key, Fingerprint.of("d"), divide);
    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("divided by attempt 2");
    assertThat(Ledger.count(dsl, "divide", key)).isEqualTo(1);
  }

  @Test
  void aRecoveryPointThatNamesNoPhaseFailsWithIllegalStateAndReleasesTheKey() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    Phases<String, RuntimeException> before =
        LedgerPhases.of(
            attempt -> {},
            attempt -> {
              throw new IllegalStateException("crash after phase 1");
            });
    assertThatThrownBy(
            () -> keys.execute("renamed", Caller.anonymous(), key, Fingerprint.of("r"), before))
        .hasMessage("crash after phase 1");
    Phases<String, RuntimeException> renamed =
        Phases.builder().phase("other_name", attempt -> {}).finish(attempt -> "x");

    assertThatThrownBy(
            () -> keys.execute("renamed", Caller.anonymous(), key, Fingerprint.of("r"), renamed))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("\"phase1\" is not a phase of this operation");
    Outcome<String> withOldPhases =
        keys.execute(
            "renamed",
            Caller.anonymous(),
            key,
            Fingerprint.of("r"),
            LedgerPhases.of(attempt -> {}, attempt -> {}));
    assertThat(withOldPhases).isInstanceOf(Outcome.Completed.class);
  }

  @Test
  void malformedKeysAndScopesAreRefusedBeforeAnythingIsWritten() {
    IdempotencyKeys<String> keys = keys();
    IdempotentAction<String, RuntimeException> action =
        attempt -> {
          throw new AssertionError("must not run");
        };

    assertThatThrownBy(
            () -> keys.execute("bad", Caller.anonymous(), "has space", Fingerprint.of("f"), action))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(
            () -> keys.execute("bad", Caller.anonymous(), "", Fingerprint.of("f"), action))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(
            () -> keys.execute("bad", Caller.anonymous(), null, Fingerprint.of("f"), action))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(
            () -> keys.execute(" ", Caller.anonymous(), "k", Fingerprint.of("f"), action))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("scope");
    assertThat(
            dsl.fetchCount(dsl.selectFrom(IdempotencyConfig.DEFAULT_TABLE).where("scope = 'bad'")))
        .isZero();
  }

  @Test
  void metricsAreTaggedWithTheComponentAndTheScopeNeverWithTheKey() {
    IdempotencyKeys<String> keys = keys();
    String key = newKey();
    keys.execute("tagged", Caller.anonymous(), key, Fingerprint.of("f"), attempt -> "r");
    keys.execute("tagged", Caller.anonymous(), key, Fingerprint.of("f"), attempt -> "r");

    List<Meter> meters =
        registry.getMeters().stream()
            .filter(m -> "tagged".equals(m.getId().getTag("scope")))
            .toList();
    assertThat(meters)
        .extracting(m -> m.getId().getName())
        .containsExactlyInAnyOrder(
            "nolock.idempotency.first.runs",
            "nolock.idempotency.replays",
            "nolock.idempotency.in.progress",
            "nolock.idempotency.fingerprint.mismatches",
            "nolock.idempotency.takeovers",
            "nolock.idempotency.stale.attempts",
            "nolock.idempotency.releases",
            "nolock.idempotency.waits.refused");
    assertThat(meters)
        .allSatisfy(
            m -> {
              assertThat(m.getId().getTag("component")).isEqualTo("idempotency");
              assertThat(m.getId().getTag("name")).isEqualTo("keys-it");
              assertThat(m.getId().getTags()).noneMatch(t -> t.getValue().contains(key));
            });
    assertThat(counter("first.runs", "tagged")).isEqualTo(1);
    assertThat(counter("replays", "tagged")).isEqualTo(1);
  }

  static void await(CountDownLatch latch) {
    try {
      if (!latch.await(LATCH_WAIT.toSeconds(), TimeUnit.SECONDS)) {
        throw new AssertionError("latch not released within " + LATCH_WAIT);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }
}
