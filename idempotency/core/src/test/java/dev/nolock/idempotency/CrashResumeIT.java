package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A process killed with {@code kill -9} in the middle of phase 2 of 3: the retry, once the lease
 * has expired, resumes at phase 2, and the ledger shows phase 1 once.
 */
@ExtendWith(PostgresExtension.class)
class CrashResumeIT {

  private static final Duration LEASE = Duration.ofSeconds(3);

  @Test
  void aRetryAfterAKillInPhase2ResumesAtPhase2AndPhase1HappenedOnce(PostgresSchema schema)
      throws Exception {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom().lease(LEASE).build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
    Ledger.create(schema.dsl());
    String scope = IdempotencyChildMain.SCOPE;
    String key = UUID.randomUUID().toString();

    long crashedToken;
    try (ChildJvm child =
        ChildJvm.start(
            "crashing-attempt",
            IdempotencyChildMain.class,
            "PHASES",
            schema.jdbcUrl(),
            scope,
            key,
            Long.toString(LEASE.toMillis()),
            "ALL")) {
      // Phase 1 has committed and phase 2 has written its (uncommitted) ledger row.
      crashedToken = Long.parseLong(child.awaitLine("IN_PHASE_2", Duration.ofSeconds(60))[1]);
      child.signal("KILL");
      assertThat(child.awaitExit(Duration.ofSeconds(30))).isEqualTo(137);
    }
    assertThat(Ledger.rows(schema.dsl(), scope, key))
        .as("after the kill only phase 1 is committed")
        .containsExactly(new Ledger.Row(LedgerPhases.PHASE_1, crashedToken));

    AtomicInteger phase1Runs = new AtomicInteger();
    List<String> resumedFrom = new ArrayList<>();
    Phases<String, RuntimeException> phases =
        LedgerPhases.of(
            attempt -> phase1Runs.incrementAndGet(),
            attempt -> resumedFrom.add(attempt.resumedFrom()));
    List<Outcome<String>> outcomes = new ArrayList<>();
    Awaitility.await("the retry takes over once the killed attempt's lease has expired")
        .atMost(LEASE.multipliedBy(5))
        .pollInterval(Duration.ofMillis(200))
        .until(
            () -> {
              Outcome<String> outcome =
                  keys.execute(
                      scope, Caller.anonymous(), key, Fingerprint.of("same-request"), phases);
              outcomes.add(outcome);
              return !(outcome instanceof Outcome.RequestInProgress<String>);
            });

    Outcome<String> last = outcomes.get(outcomes.size() - 1);
    assertThat(outcomes.subList(0, outcomes.size() - 1))
        .allSatisfy(o -> assertThat(o).isInstanceOf(Outcome.RequestInProgress.class));
    assertThat(last).isInstanceOf(Outcome.Completed.class);
    long retryToken = ((Outcome.Completed<String>) last).attempt().value();
    assertThat(retryToken).isGreaterThan(crashedToken);
    assertThat(phase1Runs).as("phase 1 is not run again").hasValue(0);
    assertThat(resumedFrom).containsExactly(LedgerPhases.PHASE_1);
    assertThat(Ledger.rows(schema.dsl(), scope, key))
        .containsExactly(
            new Ledger.Row(LedgerPhases.PHASE_1, crashedToken),
            new Ledger.Row(LedgerPhases.PHASE_2, retryToken),
            new Ledger.Row(LedgerPhases.PHASE_3, retryToken));
    assertThat(((Outcome.Completed<String>) last).result())
        .isEqualTo("done by attempt " + retryToken);
  }
}
