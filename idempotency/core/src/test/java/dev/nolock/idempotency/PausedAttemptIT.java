package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A process frozen with SIGSTOP inside its action past its lease; a retry takes over and completes;
 * the frozen process is resumed, attempts to store its result and commit its effect, and is refused
 * by the attempt token. The negative control runs the same scenario with the attempt-token check
 * switched off in the frozen process and catches the second effect.
 */
@ExtendWith(PostgresExtension.class)
class PausedAttemptIT {

  private static final Duration LEASE = Duration.ofSeconds(3);

  private final PostgresSchema schema;
  private final IdempotencyKeys<String> keys;

  PausedAttemptIT(PostgresSchema schema) {
    this.schema = schema;
    this.keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().lease(LEASE).build(),
            ResultCodec.utf8());
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
    Ledger.create(schema.dsl());
  }

  /** What the scenario observed. */
  record Run(
      long frozenToken,
      long retryToken,
      String retryResult,
      String storing,
      String frozenOutcome,
      long frozenOutcomeToken,
      long frozenStaleCount,
      List<Ledger.Row> ledger,
      Outcome<String> replayAfterwards) {}

  private Run freezeTakeOverResume(String key, String safeguards) throws Exception {
    String scope = IdempotencyChildMain.SCOPE;
    try (ChildJvm child =
        ChildJvm.start(
            "paused-attempt",
            IdempotencyChildMain.class,
            "ACTION",
            schema.jdbcUrl(),
            scope,
            key,
            Long.toString(LEASE.toMillis()),
            safeguards)) {
      long frozenToken = Long.parseLong(child.awaitLine("IN_ACTION", Duration.ofSeconds(60))[1]);
      child.signal("STOP");
      child.awaitState('T');

      List<Outcome<String>> retries = new ArrayList<>();
      Awaitility.await("a retry takes over after the frozen attempt's lease")
          .atMost(LEASE.multipliedBy(5))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                Outcome<String> outcome =
                    keys.execute(
                        scope,
                        Caller.anonymous(),
                        key,
                        Fingerprint.of("same-request"),
                        attempt -> {
                          Ledger.write(attempt, "effect");
                          return "result of attempt " + attempt.token().value();
                        });
                retries.add(outcome);
                return !(outcome instanceof Outcome.RequestInProgress<String>);
              });
      Outcome.Completed<String> retry = (Outcome.Completed<String>) retries.get(retries.size() - 1);
      // Still frozen while the retry completed.
      assertThat(child.visibleInProc()).isTrue();

      child.go(); // the gate: its action returns as soon as it runs again
      child.signal("CONT");
      String storing = String.join(" ", child.awaitLine("STORING", Duration.ofSeconds(30)));
      String[] outcome = child.awaitLine("OUTCOME", Duration.ofSeconds(30));
      long staleCount =
          Long.parseLong(child.awaitLine("STALE_ATTEMPTS", Duration.ofSeconds(10))[1]);
      assertThat(child.awaitExit(Duration.ofSeconds(30))).isZero();
      return new Run(
          frozenToken,
          retry.attempt().value(),
          retry.result(),
          storing,
          outcome[1],
          Long.parseLong(outcome[2]),
          staleCount,
          Ledger.rows(schema.dsl(), scope, key),
          keys.execute(
              scope,
              Caller.anonymous(),
              key,
              Fingerprint.of("same-request"),
              attempt -> "never runs"));
    }
  }

  @Test
  void aFrozenAttemptResumedAfterATakeoverIsRefusedAndTheLedgerShowsOneEffect() throws Exception {
    Run run = freezeTakeOverResume(UUID.randomUUID().toString(), "ALL");

    assertThat(run.retryToken()).isGreaterThan(run.frozenToken());
    assertThat(run.storing())
        .as("the frozen attempt went on to store its result")
        .isEqualTo("STORING " + run.frozenToken());
    assertThat(run.frozenOutcome()).isEqualTo("StaleAttempt");
    assertThat(run.frozenOutcomeToken()).isEqualTo(run.frozenToken());
    assertThat(run.frozenStaleCount()).isEqualTo(1);
    assertThat(run.ledger()).containsExactly(new Ledger.Row("effect", run.retryToken()));
    assertThat(run.replayAfterwards()).isEqualTo(new Outcome.Replayed<>(run.retryResult()));
  }

  @Test
  void negativeControlWithoutTheAttemptCheckTheFrozenAttemptCommitsASecondEffect()
      throws Exception {
    Run run = freezeTakeOverResume(UUID.randomUUID().toString(), "NO_ATTEMPT_CHECK");

    assertThat(run.storing()).isEqualTo("STORING " + run.frozenToken());
    assertThat(run.frozenOutcome())
        .as("unprotected, the stale attempt believes it completed")
        .isEqualTo("Completed");
    assertThat(run.ledger())
        .as("the duplicate effect is caught")
        .containsExactlyInAnyOrder(
            new Ledger.Row("effect", run.retryToken()),
            new Ledger.Row("effect", run.frozenToken()));
    assertThat(run.replayAfterwards())
        .as("and the stale attempt overwrote the stored result")
        .isEqualTo(new Outcome.Replayed<>("result of attempt " + run.frozenToken()));
  }
}
