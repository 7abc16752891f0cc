package dev.nolock.idempotency;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Idempotency keys seen as testkit's {@link AttemptTokenContract}, against the real PostgreSQL,
 * through the public API ({@link IdempotencyKeys#execute(String, String, Fingerprint,
 * IdempotentAction)}) and nothing else, except one peek at the key's attempt token (see {@link
 * #retry}).
 *
 * <ul>
 *   <li><b>item</b>: an idempotency key (a fresh UUID in scope {@value #SCOPE}).
 *   <li><b>claim</b>: a request with the key, on a thread of its own, that takes the key (the claim
 *       committed: an attempt with its token and lease) and is held at the start of its one phase,
 *       before it has sent anything of it, until the test finishes it. A request told {@link
 *       Outcome.RequestInProgress} is a refused claim.
 *   <li><b>lapse</b>: the database's clock moves one lease on ({@link ShiftedDatabaseClock}), so
 *       the next request takes the key over with a higher token; the held request still runs.
 *   <li><b>finish</b>, the first time: the held request goes on; its phase writes one {@link
 *       Ledger} row and commits with the stored result, conditional on its attempt token. {@link
 *       Outcome.Completed} by this attempt is {@link Finish#FINISHED}; {@link Outcome.StaleAttempt}
 *       of this attempt is {@link Finish#STALE}.
 *   <li><b>finish</b> again: the caller sends the same request again, as a client does after
 *       "unknown" or to read the result. There is no other way to repeat a finish: the library
 *       never re-sends an attempt's commit, and every repeat of a request is a new call. See {@link
 *       #retry} for how its outcome maps.
 *   <li><b>finishWithFault</b>: the same first finish, with {@link JdbcFaults} losing the request
 *       that ends the phase's transaction (armed from inside the phase, once it goes on): its
 *       {@code COMMIT} for a current attempt; for a stale one, whose conditional update matched no
 *       row, the {@code ROLLBACK} the library sends instead, since it has no {@code COMMIT} to
 *       lose.
 *   <li><b>effects</b>: the key's ledger rows (the ledger has no unique key).
 * </ul>
 *
 * One instance per class, so the faulty pool and the shifted clock live as long as the schema.
 */
@ExtendWith(PostgresExtension.class)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class KeyAttemptsContract extends AttemptTokenContract<KeyAttemptsContract.Request> {

  static final String SCOPE = "orders.create";

  private static final Fingerprint SAME_REQUEST = Fingerprint.of("one order");

  /** The stored result names the attempt that committed it, so a replay says whose it is. */
  private static final String RESULT = "ordered by attempt ";

  /** An upper bound on any one answer, so that a broken run fails instead of hanging. */
  private static final Duration ANSWER_WITHIN = Duration.ofSeconds(30);

  private final PostgresSchema schema;
  private final ShiftedDatabaseClock databaseClock;
  private final JdbcFaults faults;
  private final IdempotencyKeys<String> keys;
  private final ExecutorService requests = Executors.newCachedThreadPool();
  private final List<Request> sent = new CopyOnWriteArrayList<>();

  /** One request with a key, held at the start of its phase until {@link #finish}. */
  static final class Request {
    final String key;
    final CompletableFuture<Long> token = new CompletableFuture<>();
    final CountDownLatch goOn = new CountDownLatch(1);
    final AtomicReference<Runnable> onGoingOn = new AtomicReference<>(() -> {});
    CompletableFuture<Outcome<String>> call;
    boolean answered;

    Request(String key) {
      this.key = key;
    }

    @Override
    public String toString() {
      return "request with key " + key + (token.isDone() ? " (attempt " + token.join() + ")" : "");
    }
  }

  KeyAttemptsContract(PostgresSchema schema, Safeguards safeguards) {
    this.schema = schema;
    this.databaseClock = ShiftedDatabaseClock.install(schema);
    this.faults = JdbcFaults.pool(ShiftedDatabaseClock.jdbcUrl(schema));
    this.keys =
        IdempotencyKeys.withSafeguards(
            faults.dataSource(),
            IdempotencyConfig.ofDefaults(),
            ResultCodec.utf8(),
            FailurePolicy.releaseOnEveryFailure(),
            safeguards);
    keys.createTableIfMissing();
    Ledger.create(schema.dsl());
  }

  /**
   * A test that failed half-way leaves requests held: let them end, so their connections return.
   */
  @AfterEach
  void endHeldRequests() {
    faults.disarmAll();
    for (Request request : sent) {
      request.goOn.countDown();
      try {
        request.call.get(ANSWER_WITHIN.toSeconds(), TimeUnit.SECONDS);
      } catch (ExecutionException | TimeoutException e) {
        // Its answer was judged (or the test failed) already.
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    sent.clear();
  }

  @AfterAll
  void closePool() {
    requests.shutdownNow();
    faults.close();
  }

  @Override
  protected String newItem() {
    return UUID.randomUUID().toString();
  }

  @Override
  protected Option<Request> claim(String key) {
    Request request = new Request(key);
    request.call =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), key, SAME_REQUEST, heldUntilFinished(request)),
            requests);
    sent.add(request);
    try {
      CompletableFuture.anyOf(request.token, request.call)
          .get(ANSWER_WITHIN.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      // The call failed before its phase began; answer() below rethrows its exception.
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("the " + request + " neither took the key nor was answered", e);
    }
    if (request.token.isDone()) {
      return Option.some(request);
    }
    request.answered = true;
    Outcome<String> refused = answer(request);
    if (refused instanceof Outcome.RequestInProgress<String>) {
      return Option.none();
    }
    throw new AssertionError("the " + request + " took no attempt but was answered " + refused);
  }

  @Override
  protected void lapse(String key) {
    databaseClock.advance(IdempotencyConfig.DEFAULT_LEASE);
  }

  @Override
  protected long token(Request request) {
    return request.token.join();
  }

  @Override
  protected Finish finish(Request request) {
    if (request.answered) {
      return retry(request);
    }
    request.answered = true;
    request.goOn.countDown();
    Outcome<String> outcome = answer(request);
    long mine = token(request);
    if (outcome instanceof Outcome.Completed<String> done && done.attempt().value() == mine) {
      return Finish.FINISHED;
    }
    if (outcome instanceof Outcome.StaleAttempt<String> stale && stale.attempt().value() == mine) {
      return Finish.STALE;
    }
    throw new AssertionError("attempt " + mine + " of the key was answered " + outcome);
  }

  /**
   * The request sent again after its first call was answered, unheld. What the caller hears maps
   * as:
   *
   * <ul>
   *   <li>{@link Outcome.Completed}: this call committed the effect, as a newer attempt of the same
   *       request (the first call's attempt did not commit and its key was released) → {@link
   *       Finish#FINISHED}.
   *   <li>{@link Outcome.Replayed} of the result this attempt committed → {@link
   *       Finish#ALREADY_FINISHED}; of a newer attempt's result → {@link Finish#STALE} (a newer
   *       attempt finished the key; nothing was written for this one). The result names the attempt
   *       that stored it: {@code Replayed} itself does not say.
   *   <li>{@link Outcome.RequestInProgress} while a newer attempt holds the key → {@link
   *       Finish#STALE}. The outcome does not say who holds the key, so the key's attempt token is
   *       peeked; held by this attempt itself (a lease nobody runs) fails the test instead.
   *   <li>{@link Outcome.StaleAttempt}: the repeat itself was taken over → {@link Finish#STALE}.
   * </ul>
   */
  private Finish retry(Request request) {
    long mine = token(request);
    Outcome<String> outcome =
        keys.execute(SCOPE, Caller.anonymous(), request.key, SAME_REQUEST, this::order);
    if (outcome instanceof Outcome.Completed<String> done) {
      if (done.attempt().value() <= mine) {
        throw new AssertionError("the repeat of attempt " + mine + " was answered " + outcome);
      }
      return Finish.FINISHED;
    }
    if (outcome instanceof Outcome.Replayed<String> replay) {
      long storedBy = Long.parseLong(replay.result().substring(RESULT.length()));
      if (storedBy < mine) {
        throw new AssertionError(
            "the repeat of attempt " + mine + " replays the result of older attempt " + storedBy);
      }
      return storedBy == mine ? Finish.ALREADY_FINISHED : Finish.STALE;
    }
    if (outcome instanceof Outcome.RequestInProgress<String>) {
      long holder = heldBy(request.key);
      if (holder <= mine) {
        throw new AssertionError(
            "the repeat of attempt "
                + mine
                + " was told the key is in progress while attempt "
                + holder
                + " holds it");
      }
      return Finish.STALE;
    }
    if (outcome instanceof Outcome.StaleAttempt<String>) {
      return Finish.STALE;
    }
    throw new AssertionError("the repeat of attempt " + mine + " was answered " + outcome);
  }

  @Override
  protected Finish finishWithFault(Request request, FaultKind kind) {
    if (request.answered) {
      throw new IllegalStateException(
          "only a held request's own finish can lose its commit; a repeat is a new call");
    }
    AtomicReference<InjectedFault> fault = new AtomicReference<>();
    request.onGoingOn.set(() -> fault.set(faults.onNextTransactionEnd(kind)));
    Finish heard;
    try {
      heard = finish(request);
    } catch (BackendUnavailableException unknown) {
      assertFired(fault, kind);
      throw unknown;
    }
    assertFired(fault, kind);
    return heard;
  }

  @Override
  protected int effects(String key) {
    return Ledger.count(schema.dsl(), SCOPE, key);
  }

  private IdempotentAction<String, RuntimeException> heldUntilFinished(Request request) {
    return attempt -> {
      request.token.complete(attempt.token().value());
      try {
        if (!request.goOn.await(ANSWER_WITHIN.toSeconds(), TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test never finished the " + request);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while held", e);
      }
      request.onGoingOn.get().run();
      return order(attempt);
    };
  }

  /** The effect: one ledger row in the attempt's transaction; the result names the attempt. */
  private String order(Attempt attempt) {
    Ledger.write(attempt, "order");
    return RESULT + attempt.token().value();
  }

  private Outcome<String> answer(Request request) {
    try {
      return request.call.get(ANSWER_WITHIN.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException failure) {
        throw failure;
      }
      throw new AssertionError("the " + request + " failed", e.getCause());
    } catch (InterruptedException | TimeoutException e) {
      throw new AssertionError("the " + request + " was not answered", e);
    }
  }

  /** The attempt token stored with the key: the attempt that holds it, or that completed it. */
  private long heldBy(String key) {
    return schema
        .dsl()
        .select(field(name("attempt_token"), Long.class))
        .from(table(name(IdempotencyConfig.DEFAULT_TABLE)))
        .where(field(name("scope")).eq(SCOPE).and(field(name("idempotency_key")).eq(key)))
        .fetchSingle()
        .value1();
  }

  private void assertFired(AtomicReference<InjectedFault> fault, FaultKind kind) {
    faults.disarmAll();
    if (fault.get() == null) {
      throw new AssertionError(kind + " was never armed: the held phase did not go on");
    }
    fault.get().assertFired();
  }
}
