package dev.nolock.idempotency.internal;

import dev.nolock.idempotency.Attempt;
import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.FailurePolicy;
import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotentAction;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.Phases;
import dev.nolock.idempotency.ResultCodec;
import dev.nolock.idempotency.StoredResult;
import dev.nolock.idempotency.internal.KeyTable.AbandonedRow;
import dev.nolock.idempotency.internal.KeyTable.Claim;
import dev.nolock.idempotency.internal.KeyTable.KeyRow;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.WorkThrew;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.function.Function;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.conf.ParamType;
import org.jooq.exception.DataAccessException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The algorithm behind {@link dev.nolock.idempotency.IdempotencyKeys}; see its Javadoc for the
 * steps. Thread-safe.
 */
public final class KeyExecutor<R> {

  private static final Logger LOG = LoggerFactory.getLogger(KeyExecutor.class);

  /** A claim that found the row gone (purged between two statements) is repeated this often. */
  private static final int MAX_CLAIMS_PER_CALL = 3;

  private final DSLContext dsl;
  private final IdempotencyConfig config;
  private final ResultCodec<R> codec;
  private final FailurePolicy<R> failurePolicy;
  private final Safeguards safeguards;
  private final KeyTable table;
  private final LeaseClock clock;
  private final int timeout;
  private final ScopeMeters scopes;
  private final WaitBound waits;

  /** The configured registry, or one that keeps nothing (no children) when metrics are off. */
  private final MeterRegistry registry;

  public KeyExecutor(
      DSLContext dsl,
      IdempotencyConfig config,
      ResultCodec<R> codec,
      FailurePolicy<R> failurePolicy,
      Safeguards safeguards,
      KeyTable table) {
    this.dsl = Objects.requireNonNull(dsl, "dsl");
    this.config = Objects.requireNonNull(config, "config");
    this.codec = Objects.requireNonNull(codec, "codec");
    this.failurePolicy = Objects.requireNonNull(failurePolicy, "failurePolicy");
    this.safeguards = Objects.requireNonNull(safeguards, "safeguards");
    this.table = Objects.requireNonNull(table, "table");
    this.clock = config.clock();
    this.timeout = Math.toIntExact(config.queryTimeout().toSeconds());
    this.registry = config.meterRegistry().getOrElse(CompositeMeterRegistry::new);
    this.scopes =
        config.meterRegistry().isDefined()
            ? new ScopeMeters(registry, config.metricsInstanceName(), config.maxMeteredScopes())
            : ScopeMeters.unmetered(registry, config.metricsInstanceName());
    this.waits =
        new WaitBound(
            safeguards.waitBound() ? config.maxWaitingWhileInProgress() : Integer.MAX_VALUE);
  }

  /**
   * Registers the abandoned-keys gauge under the configured metrics name, where it reads this
   * executor from now on (the newest one with that name); call once the executor is constructed.
   */
  public void registerGauge() {
    if (IdempotencyMetrics.registerAbandonedKeys(
        registry, config.metricsInstanceName(), this, KeyExecutor::sampleAbandoned)) {
      LOG.info(
          "The abandoned-keys gauge name=\"{}\" now reads the IdempotencyKeys on {} created last;"
              + " an earlier one with the same metrics name is no longer read. If they use"
              + " different databases, give each its own instance name in"
              + " IdempotencyConfig.metrics(registry, instanceName).",
          config.metricsInstanceName(),
          table);
    }
  }

  public void createTableIfMissing() {
    translate(
        () -> "creating " + table + " and its sequence and indexes (the user needs CREATE)",
        () -> {
          dsl.transaction(
              tx -> {
                List<Query> ddl = table.createIfMissing(tx.dsl());
                // Sequence and table first: the indexes name columns an older or foreign table
                // may lack, and their error would not say which DDL fits. Each behind a savepoint
                // of this transaction: an instance starting at the same moment may create it
                // first, and this one then finds it (CreateIfMissing).
                table.createSequenceAndTable(tx.dsl(), config.queryTimeout());
                // A table left in place by IF NOT EXISTS must fit the statements: SchemaMismatch.
                table
                    .shape()
                    .require(
                        tx.dsl(),
                        config.queryTimeout(),
                        config.table(),
                        ddl.stream().map(q -> q.getSQL(ParamType.INLINED)).toList());
                table.createIndexes(tx.dsl(), config.queryTimeout());
              });
          return null;
        });
  }

  public int purgeExpired() {
    int total = 0;
    while (true) {
      int deletedBefore = total;
      int deleted =
          translate(
              () ->
                  "purging expired keys from "
                      + table
                      + " ("
                      + deletedBefore
                      + " deleted so far, committed)",
              () ->
                  dsl.transactionResult(
                      tx -> table.purgeBatch(tx.dsl(), config.purgeBatchSize(), timeout)));
      total += deleted;
      if (deleted < config.purgeBatchSize()) {
        return total;
      }
    }
  }

  public int countAbandoned() {
    return translate(
        () -> "counting the abandoned keys of " + table + ". Retry later",
        () -> dsl.transactionResult(tx -> table.countAbandoned(tx.dsl(), timeout)));
  }

  public List<AbandonedRow> listAbandoned(
      String afterScope, String afterPrincipal, String afterKey, int limit) {
    return translate(
        () -> "listing the abandoned keys of " + table + ". Retry later",
        () ->
            dsl.transactionResult(
                tx ->
                    table.listAbandoned(
                        tx.dsl(), afterScope, afterPrincipal, afterKey, limit, timeout)));
  }

  public boolean forget(String scope, Caller caller, String key) {
    int rows =
        translate(
            () ->
                "forgetting a key in scope \""
                    + scope
                    + "\"; whether it was forgotten is unknown. List the abandoned keys to see,"
                    + " or call forget again (false then means it is gone, completed or held)",
            () ->
                dsl.transactionResult(
                    tx -> table.forget(tx.dsl(), scope, caller.principal(), key, timeout)));
    return SqlErrors.atMostOneRow(
        rows, "forget of a key", table, "(scope, principal, idempotency_key)");
  }

  /** The gauge's reading: NaN when PostgreSQL cannot be asked, never a stale number. */
  private static double sampleAbandoned(KeyExecutor<?> executor) {
    try {
      return executor.countAbandoned();
    } catch (BackendUnavailableException e) {
      LOG.debug("The abandoned-keys gauge of {} could not be read", executor.table, e);
      return Double.NaN;
    }
  }

  public <X extends Exception> Outcome<R> execute(
      String scope, Caller caller, String key, Fingerprint fingerprint, Phases<R, X> phases)
      throws X {
    IdempotencyMetrics counters = scopes.forScope(scope);
    // The wait loop only claims and reads; the phases run after it, outside the Supplier, so that
    // their checked exception reaches the caller without a carrier.
    Either<Outcome<R>, Either<Outcome<R>, Claimed>> result =
        waits
            .bounding(config.waitWhileInProgress(), counters::waitRefused)
            .run(
                clock,
                () -> {
                  Either<Outcome<R>, Claimed> claimed =
                      once(scope, caller, key, fingerprint, counters);
                  return claimed.isLeft()
                          && claimed.getLeft() instanceof Outcome.RequestInProgress<R> inProgress
                      ? Either.left(inProgress)
                      : Either.right(claimed);
                });
    if (result.isLeft()) {
      counters.inProgress();
      return result.getLeft();
    }
    Either<Outcome<R>, Claimed> claimed = result.get();
    if (claimed.isLeft()) {
      return claimed.getLeft();
    }
    return run(
        new KeyRef(scope, caller, key),
        claimed.get().claim(),
        claimed.get().sentAt(),
        phases,
        counters);
  }

  /** The row of one key: its scope, its caller and the key. */
  private record KeyRef(String scope, Caller caller, String key) {
    String principal() {
      return caller.principal();
    }
  }

  /** A claim this call won, and when the statement that won it was sent. */
  private record Claimed(Claim claim, long sentAt) {}

  /** One claim: the key to run, or the outcome of a key this call did not claim. */
  private Either<Outcome<R>, Claimed> once(
      String scope,
      Caller caller,
      String key,
      Fingerprint fingerprint,
      IdempotencyMetrics counters) {
    for (int claims = 1; ; claims++) {
      long sentAt = clock.nanoTime();
      Optional<Claim> claim =
          translate(
              () -> "claiming key in scope \"" + scope + "\". Retry later with the same key",
              () ->
                  dsl.transactionResult(
                      tx ->
                          table.claim(
                              tx.dsl(),
                              scope,
                              caller.principal(),
                              key,
                              fingerprint,
                              config.lease(),
                              config.retention(),
                              safeguards.fingerprintCheck(),
                              timeout)));
      if (claim.isPresent()) {
        if (claim.get().number() == 1) {
          counters.firstRun();
        } else {
          counters.takeover();
        }
        return Either.right(new Claimed(claim.get(), sentAt));
      }
      Optional<KeyRow> row =
          translate(
              () -> "reading key in scope \"" + scope + "\". Retry later with the same key",
              () ->
                  dsl.transactionResult(
                      tx -> table.read(tx.dsl(), scope, caller.principal(), key, timeout)));
      if (row.isPresent()
          && safeguards.fingerprintCheck()
          && !row.get().fingerprint().equals(fingerprint.value())) {
        counters.fingerprintMismatch();
        return Either.left(new Outcome.KeyReusedWithDifferentRequest<>());
      }
      if (row.isEmpty() || (!row.get().completed() && row.get().leaseRemaining().isZero())) {
        // Purged, or its lease ended, between the two statements: claim again.
        if (claims < MAX_CLAIMS_PER_CALL) {
          continue;
        }
        return Either.left(new Outcome.RequestInProgress<>(Duration.ZERO));
      }
      KeyRow existing = row.get();
      if (existing.completed()) {
        counters.replay();
        return Either.left(new Outcome.Replayed<>(codec.decode(existing.result())));
      }
      return Either.left(new Outcome.RequestInProgress<>(existing.leaseRemaining()));
    }
  }

  private <X extends Exception> Outcome<R> run(
      KeyRef row, Claim claim, long sentAt, Phases<R, X> phases, IdempotencyMetrics counters)
      throws X {
    FencingToken token = FencingToken.of(claim.token());
    int first;
    try {
      first = phases.resumeIndex(claim.recoveryPoint());
    } catch (IllegalStateException e) {
      releaseQuietly(row, token, e);
      throw e;
    }
    String scope = row.scope();
    long leaseFrom = sentAt;
    for (int i = first; i <= phases.names().size(); i++) {
      boolean last = i == phases.names().size();
      String phaseName = last ? Phases.FINISHED : phases.names().get(i);
      Deadline deadline = Deadline.forHolder(clock, leaseFrom, config.lease());
      Function<DSLContext, Attempt> attemptOn =
          tx ->
              new Attempt(
                  scope,
                  row.caller(),
                  row.key(),
                  token,
                  claim.number(),
                  claim.recoveryPoint(),
                  claim.downstreamKey().toString(),
                  tx,
                  deadline);
      long[] extendedAt = new long[1];
      Outcome<R> outcome;
      try {
        if (last) {
          IdempotentAction<R, X> action = phases.last();
          R result =
              dsl.transactionResult(
                  tx -> {
                    // The action's exception and the codec's are the caller's code failing: the
                    // FailurePolicy decides, even for a DataAccessException of the action's own.
                    R value = WorkThrew.call(t -> action.run(attemptOn.apply(t)), tx.dsl());
                    StoredResult stored = WorkThrew.call(t -> codec.encode(value), tx.dsl());
                    store(tx.dsl(), row, token, stored);
                    return value;
                  });
          return new Outcome.Completed<>(result, token);
        }
        Phases.Step<X> step = phases.steps().get(i);
        dsl.transaction(
            tx -> {
              WorkThrew.call(
                  t -> {
                    step.run(attemptOn.apply(t));
                    return null;
                  },
                  tx.dsl());
              extendedAt[0] = clock.nanoTime();
              int rows =
                  table.advance(
                      tx.dsl(),
                      scope,
                      row.principal(),
                      row.key(),
                      token.value(),
                      phaseName,
                      config.lease(),
                      config.retention(),
                      safeguards.attemptCheck(),
                      timeout);
              checkRows(rows);
            });
        leaseFrom = extendedAt[0];
        continue;
      } catch (Stale stale) {
        outcome = stale(token, counters);
      } catch (WorkThrew threw) {
        outcome = failed(row, token, threw.<X>original(), counters);
      } catch (DataAccessException e) {
        releaseQuietly(row, token, e);
        throw SqlErrors.translate(
            e,
            "running phase \""
                + phaseName
                + "\" of a key in scope \""
                + scope
                + "\" (attempt "
                + token.value()
                + "); whether it committed is unknown. Retry with the same key: you get the"
                + " stored result, or a retry resumes after the last committed phase");
      }
      return outcome;
    }
    throw new IllegalStateException("unreachable: the final phase always returns");
  }

  private void store(DSLContext tx, KeyRef row, FencingToken token, StoredResult stored) {
    int rows =
        table.complete(
            tx,
            row.scope(),
            row.principal(),
            row.key(),
            token.value(),
            stored,
            config.retention(),
            safeguards.attemptCheck(),
            timeout);
    checkRows(rows);
  }

  private void checkRows(int rows) {
    if (!SqlErrors.atMostOneRow(rows, "key update", table, "(scope, principal, idempotency_key)")) {
      throw new Stale();
    }
  }

  private Outcome<R> stale(FencingToken token, IdempotencyMetrics counters) {
    counters.staleAttempt();
    return new Outcome.StaleAttempt<>(token);
  }

  /**
   * Stores {@code failure} as the key's final result, or releases the key and rethrows it. Declared
   * {@code X}: the phase that threw it is a {@code Phases<R, X>}, so it is an {@code X} or
   * unchecked.
   */
  private <X extends Exception> Outcome<R> failed(
      KeyRef row, FencingToken token, X failure, IdempotencyMetrics counters) throws X {
    if (failure instanceof InterruptedException) {
      // An interrupt asks the thread to stop; it says nothing about the request. Storing it as
      // the key's result for good would answer every retry with it, and returning an outcome
      // would swallow the stop: release the key, keep the flag, rethrow.
      releaseQuietly(row, token, failure);
      counters.release();
      Thread.currentThread().interrupt();
      throw failure;
    }
    Option<R> finalResult;
    try {
      finalResult = Objects.requireNonNull(failurePolicy.finalResult(failure), "finalResult");
    } catch (RuntimeException policyFailure) {
      if (policyFailure != failure) { // a policy that rethrows what it was given
        failure.addSuppressed(policyFailure);
      }
      releaseQuietly(row, token, failure);
      counters.release();
      throw failure;
    }
    if (finalResult.isEmpty()) {
      releaseQuietly(row, token, failure);
      counters.release();
      throw failure;
    }
    R result = finalResult.get();
    StoredResult stored;
    try {
      stored = codec.encode(result);
    } catch (RuntimeException codecFailure) {
      failure.addSuppressed(codecFailure);
      releaseQuietly(row, token, failure);
      counters.release();
      throw failure;
    }
    try {
      translate(
          () ->
              "storing the final failure of a key in scope \""
                  + row.scope()
                  + "\"; whether it was stored is unknown. Retry with the same key",
          () -> {
            dsl.transaction(tx -> store(tx.dsl(), row, token, stored));
            return null;
          });
    } catch (Stale stale) {
      return stale(token, counters);
    }
    return new Outcome.Completed<>(result, token);
  }

  private void releaseQuietly(KeyRef row, FencingToken token, Throwable cause) {
    try {
      dsl.transaction(
          tx ->
              table.release(
                  tx.dsl(), row.scope(), row.principal(), row.key(), token.value(), timeout));
    } catch (RuntimeException e) {
      // The lease ends by itself; a retry takes over then.
      cause.addSuppressed(e);
    }
  }

  private <T> T translate(Supplier<String> doing, Supplier<T> statement) {
    return SqlErrors.run(doing, statement);
  }

  /** The attempt's conditional update matched no row: roll back and report a stale attempt. */
  private static final class Stale extends RuntimeException {
    private static final long serialVersionUID = 1L;

    Stale() {
      super("stale attempt", null, false, false);
    }
  }
}
