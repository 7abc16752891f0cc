package dev.nolock.idempotency;

import java.util.function.Consumer;

/**
 * The three-phase operation of the crash test, shared by the child JVM that is killed and the retry
 * in the test JVM: each phase writes one ledger row named after it through its attempt's
 * transaction; the final phase returns {@code "done by attempt <token>"}.
 */
final class LedgerPhases {

  static final String PHASE_1 = "phase1";
  static final String PHASE_2 = "phase2";
  static final String PHASE_3 = "phase3";

  private LedgerPhases() {}

  /**
   * @param insidePhase2 runs in phase 2 after its ledger row was written, before the phase commits
   */
  static Phases<String, RuntimeException> of(
      Consumer<Attempt> insidePhase1, Consumer<Attempt> insidePhase2) {
    return Phases.builder()
        .phase(
            PHASE_1,
            attempt -> {
              Ledger.write(attempt, PHASE_1);
              insidePhase1.accept(attempt);
            })
        .phase(
            PHASE_2,
            attempt -> {
              Ledger.write(attempt, PHASE_2);
              insidePhase2.accept(attempt);
            })
        .finish(
            attempt -> {
              Ledger.write(attempt, PHASE_3);
              return "done by attempt " + attempt.token().value();
            });
  }
}
