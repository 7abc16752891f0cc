package dev.nolock.idempotency;

import static dev.nolock.idempotency.PaymentPhases.CHARGED;
import static dev.nolock.idempotency.PaymentPhases.RECEIPT_SENT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.function.Supplier;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every statement this module sends, with its answer lost ({@link JdbcFaults}: the server applied
 * it, the client saw a dropped connection) or its request lost: the call reports the true outcome
 * or {@link BackendUnavailableException} ("unknown"), and the caller's retry with the same key ends
 * with exactly one effect per phase, never a committed phase run twice. Faults on a phase's commit
 * are armed from inside the phase, so they land on that commit and not on the claim's.
 */
@ExtendWith(PostgresExtension.class)
class LostAnswerIT {

  private static final String SCOPE = "payments.create";
  private static final Fingerprint REQUEST = Fingerprint.of("500");

  private static JdbcFaults faults;
  private static ShiftedDatabaseClock databaseClock;
  private static DSLContext dsl;

  private final List<InjectedFault> armed = new ArrayList<>();
  private IdempotencyKeys<String> keys;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    databaseClock = ShiftedDatabaseClock.install(schema);
    faults = JdbcFaults.pool(ShiftedDatabaseClock.jdbcUrl(schema));
    dsl = schema.dsl();
    IdempotencyKeys.create(faults.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
    Ledger.create(dsl);
  }

  @AfterAll
  static void closePool() {
    faults.close();
  }

  @BeforeEach
  void keysAtClockZero() {
    databaseClock.reset();
    keys =
        IdempotencyKeys.create(
            faults.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8());
  }

  @AfterEach
  void everyFaultFired() {
    faults.disarmAll();
    armed.forEach(InjectedFault::assertFired);
  }

  private InjectedFault arm(Supplier<InjectedFault> fault) {
    InjectedFault f = fault.get();
    armed.add(f);
    return f;
  }

  /** A payment whose phase {@code phase} arms a fault on its own COMMIT. */
  private Phases<String, RuntimeException> losingTheCommitOf(String phase, FaultKind kind) {
    return PaymentPhases.of(null, phase, () -> arm(() -> faults.onNextCommit(kind)));
  }

  private static long effects(String key, String effect) {
    return PaymentPhases.effects(dsl, SCOPE, key, effect);
  }

  private static void assertOneOfEach(String key) {
    assertThat(Ledger.rows(dsl, SCOPE, key))
        .as("one effect per phase, none repeated")
        .extracting(Ledger.Row::step)
        .containsExactly("charge", "receipt", "paid");
  }

  private static String newKey() {
    return UUID.randomUUID().toString();
  }

  @Test
  void aPhaseWhoseCommitAnswerIsLostIsReportedUnknownAndTheRetryResumesAfterIt() {
    String key = newKey();

    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    key,
                    REQUEST,
                    losingTheCommitOf(CHARGED, FaultKind.ANSWER_LOST)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("phase \"" + CHARGED + "\"")
        .hasMessageContaining("whether it committed is unknown");
    assertThat(effects(key, "charge")).as("the charge committed").isEqualTo(1);

    // The key was released after the failure, so the retry takes over at once.
    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));

    assertThat(effects(key, "charge")).as("charges after the retry").isEqualTo(1);
    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("paid by attempt 2");
    assertOneOfEach(key);
  }

  @Test
  void aPhaseWhoseCommitNeverReachedTheServerRunsOnceMoreOnTheRetry() {
    String key = newKey();

    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    key,
                    REQUEST,
                    losingTheCommitOf(CHARGED, FaultKind.REQUEST_LOST)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("whether it committed is unknown");
    assertThat(effects(key, "charge")).as("the charge rolled back").isZero();

    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertOneOfEach(key);
  }

  @Test
  void aPhaseWhoseRecoveryPointUpdateLostItsAnswerRollsBackAndRunsOnceMoreOnTheRetry() {
    String key = newKey();
    Phases<String, RuntimeException> phases =
        PaymentPhases.of(
            null,
            CHARGED,
            () ->
                arm(
                    () ->
                        faults.onNextStatement(
                            FaultKind.ANSWER_LOST,
                            JdbcFaults.sqlContaining("\"recovery_point\" ="))));

    assertThatThrownBy(() -> keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, phases))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("whether it committed is unknown");
    // Inside a transaction the dropped connection rolls the phase back on the server.
    assertThat(effects(key, "charge")).isZero();

    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertOneOfEach(key);
  }

  @Test
  void aFinalPhaseWhoseCommitAnswerIsLostIsReportedUnknownAndTheRetryReplaysItsResult() {
    String key = newKey();

    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    key,
                    REQUEST,
                    losingTheCommitOf(Phases.FINISHED, FaultKind.ANSWER_LOST)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("whether it committed is unknown");

    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));

    assertThat(retry).isEqualTo(new Outcome.Replayed<>("paid by attempt 1"));
    assertOneOfEach(key);
  }

  @Test
  void aClaimWhoseCommitAnswerIsLostBlocksTheKeyForAtMostOneLease() {
    String key = newKey();
    arm(() -> faults.onNextCommit(FaultKind.ANSWER_LOST));

    assertThatThrownBy(
            () -> keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("claiming key");
    assertThat(Ledger.rows(dsl, SCOPE, key)).as("nothing ran").isEmpty();
    String firstClaims =
        dsl.fetchValue(
                "SELECT downstream_key::text FROM nolock_idempotency_keys WHERE scope = ? AND"
                    + " principal = '' AND idempotency_key = ?",
                SCOPE,
                key)
            .toString();

    // The claim committed: the key is leased by an attempt nobody runs.
    Outcome<String> tooSoon =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));
    assertThat(tooSoon).isInstanceOf(Outcome.RequestInProgress.class);
    assertThat(((Outcome.RequestInProgress<String>) tooSoon).retryAfter())
        .isPositive()
        .isLessThanOrEqualTo(IdempotencyConfig.DEFAULT_LEASE);

    databaseClock.advance(IdempotencyConfig.DEFAULT_LEASE);
    List<String> downstreamKeys = new ArrayList<>();
    Outcome<String> retry =
        keys.execute(
            SCOPE,
            Caller.anonymous(),
            key,
            REQUEST,
            PaymentPhases.of(null, CHARGED, () -> {}, downstreamKeys::add));

    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) retry).result()).isEqualTo("paid by attempt 2");
    assertOneOfEach(key);
    assertThat(downstreamKeys)
        .as("the takeover calls the provider with the key of the claim whose answer was lost")
        .containsExactly(firstClaims);
  }

  @Test
  void aForgetWhoseAnswerIsLostIsReportedUnknownAndItsRetryFindsTheKeyGone() {
    String key = newKey();
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(RECEIPT_SENT)))
        .hasMessageContaining(RECEIPT_SENT + " failed");
    arm(() -> faults.onNextCommit(FaultKind.ANSWER_LOST));

    assertThatThrownBy(() -> keys.forget(SCOPE, Caller.anonymous(), key))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("whether it was forgotten is unknown");

    assertThat(keys.forget(SCOPE, Caller.anonymous(), key))
        .as("gone: the first send deleted it")
        .isFalse();
    Outcome<String> next =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));
    assertThat(next).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) next).result()).isEqualTo("paid by attempt 1");
  }

  @Test
  void aPurgeWhoseAnswerIsLostIsReportedUnknownAndNeverDeletesAKeyPastStarted() {
    String abandoned = newKey();
    String notStarted = newKey();
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), abandoned, REQUEST, PaymentPhases.of(RECEIPT_SENT)))
        .hasMessageContaining(RECEIPT_SENT + " failed");
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), notStarted, REQUEST, PaymentPhases.of(CHARGED)))
        .hasMessageContaining(CHARGED + " failed");
    databaseClock.advance(IdempotencyConfig.DEFAULT_RETENTION.plusMinutes(1));
    arm(() -> faults.onNextCommit(FaultKind.ANSWER_LOST));

    assertThatThrownBy(() -> keys.purgeExpired())
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("purging expired keys");
    assertThat(keys.purgeExpired()).as("the first send deleted what it could").isZero();

    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), abandoned, REQUEST, PaymentPhases.of(null));
    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertOneOfEach(abandoned);
  }

  @Test
  void aReleaseWhoseAnswerIsLostStillFreesTheKeyAndTheCallerSeesTheActionsOwnFailure() {
    String key = newKey();
    // The receipt phase fails; the fault is armed inside it, so it lands on the release's commit.
    Phases<String, RuntimeException> failing =
        PaymentPhases.of(
            RECEIPT_SENT,
            RECEIPT_SENT,
            () -> arm(() -> faults.onNextCommit(FaultKind.ANSWER_LOST)));

    assertThatThrownBy(() -> keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, failing))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(RECEIPT_SENT + " failed");

    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));
    assertThat(retry).as("released: taken over at once").isInstanceOf(Outcome.Completed.class);
    assertOneOfEach(key);
  }

  @Test
  void aReleaseThatNeverReachedTheServerLeavesTheKeyBlockedForAtMostOneLease() {
    String key = newKey();
    Phases<String, RuntimeException> failing =
        PaymentPhases.of(
            RECEIPT_SENT,
            RECEIPT_SENT,
            () -> arm(() -> faults.onNextCommit(FaultKind.REQUEST_LOST)));

    assertThatThrownBy(() -> keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, failing))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(RECEIPT_SENT + " failed");
    assertThat(keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null)))
        .isInstanceOf(Outcome.RequestInProgress.class);

    databaseClock.advance(IdempotencyConfig.DEFAULT_LEASE);
    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));
    assertThat(retry).isInstanceOf(Outcome.Completed.class);
    assertOneOfEach(key);
  }

  @Test
  void aReadWhoseAnswerIsLostIsReportedUnknownAndChangesNothing() {
    String key = newKey();
    keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null));
    arm(() -> faults.onNextStatement(FaultKind.ANSWER_LOST, JdbcFaults.sqlContaining("select")));

    assertThatThrownBy(
            () -> keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("reading key");

    assertThat(keys.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null)))
        .isEqualTo(new Outcome.Replayed<>("paid by attempt 1"));
    assertOneOfEach(key);
  }

  @Test
  void aFinalFailureWhoseStoreAnswerIsLostIsReportedUnknownAndTheRetryReplaysIt() {
    String key = newKey();
    IdempotencyKeys<String> declining =
        IdempotencyKeys.create(
            faults.dataSource(),
            IdempotencyConfig.ofDefaults(),
            ResultCodec.utf8(),
            FailurePolicy.finalFor(IllegalStateException.class, e -> "declined"));
    Phases<String, RuntimeException> failing =
        PaymentPhases.of(
            RECEIPT_SENT,
            RECEIPT_SENT,
            () -> arm(() -> faults.onNextCommit(FaultKind.ANSWER_LOST)));

    assertThatThrownBy(() -> declining.execute(SCOPE, Caller.anonymous(), key, REQUEST, failing))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("storing the final failure");

    assertThat(declining.execute(SCOPE, Caller.anonymous(), key, REQUEST, PaymentPhases.of(null)))
        .isEqualTo(new Outcome.Replayed<>("declined"));
    assertThat(Ledger.rows(dsl, SCOPE, key)).extracting(Ledger.Row::step).containsExactly("charge");
  }
}
