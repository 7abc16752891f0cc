package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Keys whose client never came back: retention must not turn a half-done operation (a card charged,
 * no receipt yet) into a new request that charges again. The database's clock is shifted by {@link
 * ShiftedDatabaseClock}, so a day passes without a sleep. Each test has a keys table of its own, so
 * the gauge and the listing see only its keys; the ledger has no unique key on what it counts.
 */
@ExtendWith(PostgresExtension.class)
class AbandonedKeysIT {

  static final Duration RETENTION = IdempotencyConfig.DEFAULT_RETENTION;
  static final Duration LEASE = IdempotencyConfig.DEFAULT_LEASE;
  static final String SCOPE = "payments.create";
  static final String CHARGED = PaymentPhases.CHARGED;
  static final String RECEIPT_SENT = PaymentPhases.RECEIPT_SENT;
  static final String GAUGE = "nolock.idempotency.abandoned.keys";

  private static final AtomicInteger TABLES = new AtomicInteger();

  private static HikariDataSource pool;
  private static ShiftedDatabaseClock databaseClock;
  private static DSLContext dsl;

  private final SimpleMeterRegistry registry = new SimpleMeterRegistry();
  private final String table = "abandoned_" + TABLES.incrementAndGet();
  private IdempotencyKeys<String> keys;

  @BeforeAll
  static void shiftedClockAndLedger(PostgresSchema schema) {
    databaseClock = ShiftedDatabaseClock.install(schema);
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(ShiftedDatabaseClock.jdbcUrl(schema));
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    pool = new HikariDataSource(config);
    dsl = schema.dsl();
    Ledger.create(dsl);
  }

  @AfterAll
  static void closePool() {
    pool.close();
  }

  @BeforeEach
  void freshTableAtClockZero() {
    databaseClock.reset();
    keys =
        IdempotencyKeys.create(
            pool,
            IdempotencyConfig.custom().table(table).metrics(registry, table).build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
  }

  private static Phases<String, RuntimeException> payment(String failIn) {
    return PaymentPhases.of(failIn);
  }

  private static Phases<String, RuntimeException> payment(
      String failIn, String holdIn, Runnable hold) {
    return PaymentPhases.of(failIn, holdIn, hold);
  }

  private static long effects(String key, String effect) {
    return PaymentPhases.effects(dsl, SCOPE, key, effect);
  }

  private static String newKey() {
    return UUID.randomUUID().toString();
  }

  /** The first request charges, then fails on the receipt: the key stays at {@value #CHARGED}. */
  private void abandonAfterCharging(String scope, String key) {
    assertThatThrownBy(
            () ->
                keys.execute(
                    scope, Caller.anonymous(), key, Fingerprint.of("500"), payment(RECEIPT_SENT)))
        .hasMessageContaining(RECEIPT_SENT + " failed");
  }

  private double gauge() {
    return registry.get(GAUGE).tag("name", table).gauge().value();
  }

  @Test
  void aKeyAbandonedAfterItsChargeIsNotPurgedSoALateRetryDoesNotChargeAgain() {
    String key = newKey();
    abandonAfterCharging(SCOPE, key);
    assertThat(effects(key, "charge")).as("the first attempt charged").isEqualTo(1);

    // The client gave up. A day and a minute later the scheduled purge runs, then the client's
    // retry arrives after all.
    databaseClock.advance(RETENTION.plusMinutes(1));
    int purged = keys.purgeExpired();
    Outcome<String> retry =
        keys.execute(SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(null));

    assertThat(effects(key, "charge"))
        .as(
            "charges for one key: the retry after the retention (purge deleted %d key(s)) must"
                + " resume after \"%s\", not charge the card again",
            purged, CHARGED)
        .isEqualTo(1);
    assertThat(purged).isZero();
    assertThat(retry).isEqualTo(new Outcome.Completed<>("paid by attempt 2", attemptOf(retry)));
    assertThat(Ledger.rows(dsl, SCOPE, key))
        .extracting(Ledger.Row::step)
        .containsExactly("charge", "receipt", "paid");
  }

  @Test
  void aKeyThatCommittedNothingIsStillPurgedAfterItsRetention() {
    String key = newKey();
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(CHARGED)))
        .hasMessageContaining(CHARGED + " failed");
    assertThat(effects(key, "charge")).as("the failed charge rolled back").isZero();

    databaseClock.advance(RETENTION.minusMinutes(1));
    assertThat(keys.purgeExpired()).as("within the retention").isZero();
    databaseClock.advance(Duration.ofMinutes(2));
    assertThat(keys.purgeExpired()).as("past the retention, still at 'started'").isEqualTo(1);
    assertThat(gauge()).as("a purged key is not abandoned").isZero();

    Outcome<String> again =
        keys.execute(SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(null));
    assertThat(again).isEqualTo(new Outcome.Completed<>("paid by attempt 1", attemptOf(again)));
    assertThat(effects(key, "charge")).isEqualTo(1);
  }

  @Test
  void aTakeoverPushesTheRetentionOut() {
    String key = newKey();
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(CHARGED)))
        .hasMessageContaining(CHARGED + " failed");
    databaseClock.advance(Duration.ofHours(23));
    // The client retries a day later; it fails at the same phase again (still at 'started').
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(CHARGED)))
        .hasMessageContaining(CHARGED + " failed");

    databaseClock.advance(Duration.ofHours(1).plusMinutes(1));
    assertThat(keys.purgeExpired())
        .as("24 h after the key was created but 1 h after its takeover: kept")
        .isZero();
    databaseClock.advance(Duration.ofHours(23));
    assertThat(keys.purgeExpired()).as("24 h after the takeover: purged").isEqualTo(1);
  }

  @Test
  void eachCommittedPhasePushesTheRetentionOut() {
    String key = newKey();
    // The charge takes 20 hours of database time before its phase commits: no retry took the key
    // over, so the slow attempt still holds it and its phase commits.
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("500"),
                    payment(
                        RECEIPT_SENT, CHARGED, () -> databaseClock.advance(Duration.ofHours(20)))))
        .hasMessageContaining(RECEIPT_SENT + " failed");
    assertThat(effects(key, "charge")).isEqualTo(1);

    databaseClock.advance(Duration.ofHours(4).plusMinutes(1));
    assertThat(gauge()).as("24 h after the claim, 4 h after the phase committed").isZero();
    assertThat(keys.abandonedKeys(10)).isEmpty();
    databaseClock.advance(Duration.ofHours(20));
    assertThat(gauge()).as("24 h after the phase committed").isEqualTo(1);
    assertThat(keys.abandonedKeys(10)).extracting(AbandonedKey::key).containsExactly(key);
  }

  @Test
  void theGaugeCountsAbandonedKeysTaggedByTheTableNeverByKey() {
    assertThat(gauge()).as("registered at creation, before any key").isZero();
    String abandoned1 = newKey();
    String abandoned2 = newKey();
    String notStarted = newKey();
    String completed = newKey();
    abandonAfterCharging(SCOPE, abandoned1);
    abandonAfterCharging("refunds.create", abandoned2);
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE, Caller.anonymous(), notStarted, Fingerprint.of("500"), payment(CHARGED)))
        .hasMessageContaining(CHARGED + " failed");
    keys.execute(SCOPE, Caller.anonymous(), completed, Fingerprint.of("500"), payment(null));

    assertThat(gauge()).as("within the retention nothing is abandoned yet").isZero();
    databaseClock.advance(RETENTION.plusMinutes(1));
    assertThat(gauge()).isEqualTo(2);
    assertThat(keys.purgeExpired()).as("the 'started' and the completed key").isEqualTo(2);
    assertThat(gauge()).as("the purge keeps both abandoned keys").isEqualTo(2);

    Gauge meter = registry.get(GAUGE).gauge();
    assertThat(meter.getId().getTags())
        .containsExactlyInAnyOrder(Tag.of("component", "idempotency"), Tag.of("name", table));
    assertThat(registry.getMeters())
        .flatExtracting(m -> m.getId().getTags())
        .extracting(Tag::getValue)
        .doesNotContain(abandoned1, abandoned2, notStarted, completed);

    keys.execute(SCOPE, Caller.anonymous(), abandoned1, Fingerprint.of("500"), payment(null));
    assertThat(gauge()).as("a completed key is no longer abandoned").isEqualTo(1);
  }

  @Test
  void abandonedKeysAreListedInBoundedPages() {
    List<String> expected = new ArrayList<>();
    for (String scope : List.of("a.scope", "b.scope")) {
      for (int i = 0; i < 3; i++) {
        String key = "key-" + i;
        abandonAfterCharging(scope, key);
        expected.add(scope + "/" + key);
      }
    }
    databaseClock.advance(RETENTION.plusMinutes(1));

    List<AbandonedKey> seen = new ArrayList<>();
    List<Integer> pageSizes = new ArrayList<>();
    List<AbandonedKey> page = keys.abandonedKeys(4);
    while (true) {
      pageSizes.add(page.size());
      seen.addAll(page);
      if (page.size() < 4) {
        break;
      }
      page = keys.abandonedKeys(page.get(page.size() - 1), 4);
    }

    assertThat(pageSizes).containsExactly(4, 2);
    assertThat(seen).extracting(k -> k.scope() + "/" + k.key()).containsExactlyElementsOf(expected);
    assertThat(seen)
        .allSatisfy(
            k -> {
              assertThat(k.recoveryPoint()).isEqualTo(CHARGED);
              assertThat(k.attempts()).isEqualTo(1);
              assertThat(k.retentionEndedAt()).isAfter(k.createdAt());
            });
    assertThatThrownBy(() -> keys.abandonedKeys(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("1 to 1000");
    assertThatThrownBy(() -> keys.abandonedKeys(IdempotencyKeys.MAX_PAGE_SIZE + 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("page through them");
  }

  @Test
  void forgettingAnAbandonedKeyMakesTheNextRequestANewOneThatRunsEveryPhaseAgain() {
    String key = newKey();
    abandonAfterCharging(SCOPE, key);
    databaseClock.advance(RETENTION.plusMinutes(1));
    assertThat(gauge()).isEqualTo(1);

    assertThat(keys.forget(SCOPE, Caller.anonymous(), key)).isTrue();

    assertThat(gauge()).isZero();
    assertThat(keys.abandonedKeys(10)).isEmpty();
    assertThat(keys.forget(SCOPE, Caller.anonymous(), key)).as("already forgotten").isFalse();
    Outcome<String> next =
        keys.execute(
            SCOPE, Caller.anonymous(), key, Fingerprint.of("other request"), payment(null));
    assertThat(next)
        .as("a new request: another fingerprint is accepted, attempt 1")
        .isEqualTo(new Outcome.Completed<>("paid by attempt 1", attemptOf(next)));
    assertThat(effects(key, "charge"))
        .as("forgetting undoes nothing and the next request charges again, as documented")
        .isEqualTo(2);
  }

  @Test
  void forgetLeavesHeldCompletedAndUnknownKeysAlone() throws Exception {
    String completed = newKey();
    keys.execute(SCOPE, Caller.anonymous(), completed, Fingerprint.of("500"), payment(null));
    assertThat(keys.forget(SCOPE, Caller.anonymous(), completed)).as("completed").isFalse();
    assertThat(keys.forget(SCOPE, Caller.anonymous(), newKey())).as("unknown").isFalse();
    assertThatThrownBy(() -> keys.forget(SCOPE, Caller.anonymous(), "has space"))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(() -> keys.forget("", Caller.anonymous(), completed))
        .isInstanceOf(IllegalArgumentException.class);

    String held = newKey();
    CountDownLatch charging = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<Outcome<String>> running =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    held,
                    Fingerprint.of("500"),
                    payment(
                        null,
                        RECEIPT_SENT,
                        () -> {
                          charging.countDown();
                          IdempotencyKeysIT.await(finish);
                        })));
    assertThat(charging.await(30, TimeUnit.SECONDS)).isTrue();
    assertThat(keys.forget(SCOPE, Caller.anonymous(), held))
        .as("its attempt holds the lease")
        .isFalse();
    finish.countDown();
    assertThat(running.get(30, TimeUnit.SECONDS)).isInstanceOf(Outcome.Completed.class);
    assertThat(effects(held, "charge")).isEqualTo(1);
  }

  @Test
  void aPurgeWhileAPhaseIsInFlightDeletesOnlyAKeyThatCommittedNothing() throws Exception {
    // Two attempts paused inside a phase past their lease and the retention: one in its first
    // phase (the key is at 'started'), one in its second (the key is at 'charged').
    String atStarted = newKey();
    String atCharged = newKey();
    CountDownLatch bothPaused = new CountDownLatch(2);
    CountDownLatch resume = new CountDownLatch(1);
    Runnable pause =
        () -> {
          bothPaused.countDown();
          IdempotencyKeysIT.await(resume);
        };
    CompletableFuture<Outcome<String>> first =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    atStarted,
                    Fingerprint.of("500"),
                    payment(null, CHARGED, pause)));
    CompletableFuture<Outcome<String>> second =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    atCharged,
                    Fingerprint.of("500"),
                    payment(null, RECEIPT_SENT, pause)));
    assertThat(bothPaused.await(30, TimeUnit.SECONDS)).isTrue();
    databaseClock.advance(RETENTION.plusMinutes(1));

    int purged = keys.purgeExpired();
    resume.countDown();

    assertThat(purged).as("only the key at 'started'").isEqualTo(1);
    assertThat(first.get(30, TimeUnit.SECONDS))
        .as("its row is gone, so its phase cannot commit")
        .isInstanceOf(Outcome.StaleAttempt.class);
    assertThat(effects(atStarted, "charge")).as("the stale phase rolled back").isZero();
    assertThat(second.get(30, TimeUnit.SECONDS))
        .as("nobody took it over, so the slow attempt finishes")
        .isInstanceOf(Outcome.Completed.class);
    assertThat(effects(atCharged, "charge")).isEqualTo(1);
    assertThat(effects(atCharged, "receipt")).isEqualTo(1);
  }

  @Test
  void aTakeoverAndAPurgeOfAKeyAtStartedEndWithOneEffectInEitherOrder() {
    String purgedFirst = newKey();
    String takenOverFirst = newKey();
    for (String key : List.of(purgedFirst, takenOverFirst)) {
      assertThatThrownBy(
              () ->
                  keys.execute(
                      SCOPE, Caller.anonymous(), key, Fingerprint.of("500"), payment(CHARGED)))
          .hasMessageContaining(CHARGED + " failed");
    }
    databaseClock.advance(RETENTION.plusMinutes(1));

    // The takeover charges, then fails at the receipt: its key is past 'started' now.
    assertThatThrownBy(
            () ->
                keys.execute(
                    SCOPE,
                    Caller.anonymous(),
                    takenOverFirst,
                    Fingerprint.of("500"),
                    payment(RECEIPT_SENT)))
        .hasMessageContaining(RECEIPT_SENT + " failed");
    assertThat(keys.purgeExpired()).as("only the key nobody came back for").isEqualTo(1);
    Outcome<String> afterPurge =
        keys.execute(SCOPE, Caller.anonymous(), purgedFirst, Fingerprint.of("500"), payment(null));
    Outcome<String> afterTakeover =
        keys.execute(
            SCOPE, Caller.anonymous(), takenOverFirst, Fingerprint.of("500"), payment(null));

    assertThat(afterPurge)
        .isEqualTo(new Outcome.Completed<>("paid by attempt 1", attemptOf(afterPurge)));
    assertThat(afterTakeover)
        .isEqualTo(new Outcome.Completed<>("paid by attempt 3", attemptOf(afterTakeover)));
    assertThat(effects(purgedFirst, "charge")).isEqualTo(1);
    assertThat(effects(takenOverFirst, "charge")).isEqualTo(1);
  }

  static dev.nolock.patterns.FencingToken attemptOf(Outcome<String> outcome) {
    assertThat(outcome).isInstanceOf(Outcome.Completed.class);
    return ((Outcome.Completed<String>) outcome).attempt();
  }
}
