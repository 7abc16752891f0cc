package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Keys belong to their caller: the same {@code (scope, key)} under two callers is two rows, each
 * with its own run, stored result, fingerprint check, downstream key, purge and forget. Each test
 * uses one scope and one key for both callers, so any statement that names the row without the
 * principal reads or deletes the other caller's row. Each test has a table of its own.
 */
@ExtendWith(PostgresExtension.class)
class CallerKeysIT {

  private static final String SCOPE = "payments.create";
  private static final Caller ALICE = Caller.of("alice@example.com");
  private static final Caller BOB = Caller.of("bob@example.com");
  private static final AtomicInteger TABLES = new AtomicInteger();
  private static final Field<String> PRINCIPAL = field(name("principal"), String.class);
  private static final Field<OffsetDateTime> EXPIRES_AT =
      field(name("expires_at"), OffsetDateTime.class);

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private final String tableName = "caller_keys_" + TABLES.incrementAndGet();
  private final Table<?> keysTable = table(name(tableName));
  private final String key = UUID.randomUUID().toString();
  private IdempotencyKeys<String> keys;

  CallerKeysIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeEach
  void freshTable() {
    keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().table(tableName).build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
  }

  private Outcome<String> run(Caller caller, String fingerprint, String result) {
    return keys.execute(SCOPE, caller, key, Fingerprint.of(fingerprint), attempt -> result);
  }

  /** A first phase that commits, then a failure: the key stays past "started", released. */
  private void halfDone(Caller caller) {
    Phases<String, RuntimeException> phases =
        Phases.builder()
            .phase("charged", attempt -> {})
            .finish(
                attempt -> {
                  throw new IllegalStateException("the receipt failed");
                });
    assertThatThrownBy(() -> keys.execute(SCOPE, caller, key, Fingerprint.of("f"), phases))
        .hasMessage("the receipt failed");
  }

  /** Moves the retention of {@code caller}'s row, and only of it, into the past. */
  private void age(Caller caller) {
    dsl.update(keysTable)
        .set(EXPIRES_AT, field("clock_timestamp() - interval '1 minute'", OffsetDateTime.class))
        .where(PRINCIPAL.eq(caller.principal()))
        .execute();
  }

  /**
   * Each caller's request runs, is stored and replayed as its own, and the fingerprint is checked
   * against the caller's own first request: Bob's different request is neither refused nor answered
   * with Alice's result, and Alice's repeat with Bob's request is still 422 for her.
   */
  @Test
  void twoCallersWithTheSameScopeAndKeyRunStoreAndCheckIndependently() {
    Outcome<String> alice = run(ALICE, "pay 5", "alice paid");
    Outcome<String> bob = run(BOB, "pay 7", "bob paid");

    assertThat(alice).isInstanceOf(Outcome.Completed.class);
    assertThat(bob).isInstanceOf(Outcome.Completed.class);
    assertThat(run(ALICE, "pay 5", "never")).isEqualTo(new Outcome.Replayed<>("alice paid"));
    assertThat(run(BOB, "pay 7", "never")).isEqualTo(new Outcome.Replayed<>("bob paid"));
    assertThat(run(ALICE, "pay 7", "never"))
        .isInstanceOf(Outcome.KeyReusedWithDifferentRequest.class);
    assertThat(run(Caller.anonymous(), "pay 5", "anonymous paid"))
        .isInstanceOf(Outcome.Completed.class);
    assertThat(dsl.fetchCount(keysTable)).isEqualTo(3);
  }

  /** Alice holding the key does not make Bob's request wait: no 409 across callers. */
  @Test
  void aKeyHeldByOneCallerDoesNotHoldAnother() {
    List<Outcome<String>> bobs = new ArrayList<>();
    Outcome<String> alice =
        keys.execute(
            SCOPE,
            ALICE,
            key,
            Fingerprint.of("f"),
            attempt -> {
              bobs.add(run(BOB, "f", "bob paid"));
              return "alice paid";
            });

    assertThat(alice).isInstanceOf(Outcome.Completed.class);
    assertThat(bobs).singleElement().isInstanceOf(Outcome.Completed.class);
  }

  /** Forgetting Alice's key leaves Bob's: his retry resumes (a takeover), hers starts over. */
  @Test
  void forgettingOneCallersKeyLeavesTheOthers() {
    halfDone(ALICE);
    halfDone(BOB);

    assertThat(keys.forget(SCOPE, ALICE, key)).isTrue();
    assertThat(keys.forget(SCOPE, ALICE, key)).isFalse();

    List<String> resumedFrom = new ArrayList<>();
    Phases<String, RuntimeException> retry =
        Phases.builder()
            .phase("charged", attempt -> resumedFrom.add("charged ran for " + attempt.number()))
            .finish(
                attempt -> {
                  resumedFrom.add(attempt.resumedFrom() + " " + attempt.number());
                  return "done";
                });
    keys.execute(SCOPE, BOB, key, Fingerprint.of("f"), retry);
    keys.execute(SCOPE, ALICE, key, Fingerprint.of("f"), retry);

    assertThat(resumedFrom).containsExactly("charged 2", "charged ran for 1", "started 1");
  }

  /** The purge deletes Alice's expired key and keeps Bob's, whose retention still runs. */
  @Test
  void thePurgeDeletesOnlyTheExpiredCallersKey() {
    run(ALICE, "f", "alice paid");
    run(BOB, "f", "bob paid");
    age(ALICE);

    assertThat(keys.purgeExpired()).isEqualTo(1);

    assertThat(run(BOB, "f", "never")).isEqualTo(new Outcome.Replayed<>("bob paid"));
    assertThat(run(ALICE, "f", "alice again")).isInstanceOf(Outcome.Completed.class);
  }

  /**
   * Both callers' abandoned keys are listed, each with its caller, one per page, and each is
   * forgotten through the caller its listing carries.
   */
  @Test
  void abandonedKeysOfTwoCallersArePagedAndForgottenByTheirCaller() {
    halfDone(ALICE);
    halfDone(BOB);
    age(ALICE);
    age(BOB);

    List<AbandonedKey> first = keys.abandonedKeys(1);
    List<AbandonedKey> second = keys.abandonedKeys(first.get(0), 1);
    List<AbandonedKey> third = keys.abandonedKeys(second.get(0), 1);

    assertThat(first).singleElement().extracting(AbandonedKey::key).isEqualTo(key);
    assertThat(second).singleElement().extracting(AbandonedKey::key).isEqualTo(key);
    assertThat(third).isEmpty();
    assertThat(List.of(first.get(0).caller(), second.get(0).caller()))
        .containsExactlyInAnyOrder(ALICE, BOB);
    AbandonedKey listed = first.get(0);
    assertThat(keys.forget(listed.scope(), listed.caller(), listed.key())).isTrue();
    assertThat(keys.abandonedKeys(10)).containsExactly(second.get(0));
  }

  /** Each caller's row has its own downstream key, so a provider sees two requests. */
  @Test
  void twoCallersWithTheSameScopeAndKeyGetDifferentDownstreamKeys() {
    List<String> downstream = new ArrayList<>();
    for (Caller caller : List.of(ALICE, BOB)) {
      keys.execute(
          SCOPE,
          caller,
          key,
          Fingerprint.of("f"),
          attempt -> {
            downstream.add(attempt.idempotencyKeyForDownstream());
            return "paid";
          });
    }

    assertThat(downstream).doesNotHaveDuplicates().hasSize(2);
  }

  /** An attempt printed in a log shows neither the key nor who sent it. */
  @Test
  void anAttemptPrintsNeitherTheKeyNorThePrincipal() {
    List<String> printed = new ArrayList<>();
    keys.execute(
        SCOPE,
        ALICE,
        key,
        Fingerprint.of("f"),
        attempt -> {
          printed.add(attempt.toString());
          printed.add(attempt.caller().toString());
          return "paid";
        });

    assertThat(printed)
        .allSatisfy(
            text ->
                assertThat(text)
                    .doesNotContain(key)
                    .doesNotContain(ALICE.principal())
                    .doesNotContain("alice"));
  }

  @Test
  void aNullCallerIsRefusedWithAMessageThatNamesTheAnonymousCaller() {
    assertThatThrownBy(() -> keys.execute(SCOPE, null, key, Fingerprint.of("f"), attempt -> "x"))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("Caller.anonymous()");
    assertThatThrownBy(() -> keys.forget(SCOPE, null, key))
        .hasMessageContaining("Caller.anonymous()");
  }
}
