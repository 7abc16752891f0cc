package dev.nolock.idempotency;

import java.util.function.Consumer;
import org.jooq.DSLContext;

/**
 * A payment in three phases, shared by the retention and lost-answer tests: charge (a ledger row
 * "charge", committed with the recovery point {@value #CHARGED}), send the receipt (a ledger row
 * "receipt", recovery point {@value #RECEIPT_SENT}), and finish (a ledger row "paid"; the result
 * {@code "paid by attempt <n>"}). The ledger has no unique key, so a repeated phase shows as a
 * second row.
 */
final class PaymentPhases {

  static final String CHARGED = "charged";
  static final String RECEIPT_SENT = "receipt_sent";

  private PaymentPhases() {}

  /**
   * The phase named {@code failIn} throws after its ledger write (so the write rolls back), as a
   * provider or mail server that is down would; null: nothing fails.
   */
  static Phases<String, RuntimeException> of(String failIn) {
    return of(failIn, null, () -> {});
  }

  /** The same, and the phase named {@code holdIn} runs {@code hold} after its ledger write. */
  static Phases<String, RuntimeException> of(String failIn, String holdIn, Runnable hold) {
    return of(failIn, holdIn, hold, downstreamKey -> {});
  }

  /**
   * The same, and the charge phase hands the downstream key it would send the provider to {@code
   * provider}.
   */
  static Phases<String, RuntimeException> of(
      String failIn, String holdIn, Runnable hold, Consumer<String> provider) {
    return Phases.builder()
        .phase(
            CHARGED,
            attempt -> {
              provider.accept(attempt.idempotencyKeyForDownstream());
              step(attempt, CHARGED, "charge", failIn, holdIn, hold);
            })
        .phase(
            RECEIPT_SENT, attempt -> step(attempt, RECEIPT_SENT, "receipt", failIn, holdIn, hold))
        .finish(
            attempt -> {
              step(attempt, Phases.FINISHED, "paid", failIn, holdIn, hold);
              return "paid by attempt " + attempt.number();
            });
  }

  private static void step(
      Attempt attempt, String phase, String effect, String failIn, String holdIn, Runnable hold) {
    Ledger.write(attempt, effect);
    if (phase.equals(holdIn)) {
      hold.run();
    }
    if (phase.equals(failIn)) {
      throw new IllegalStateException(phase + " failed: its service is down");
    }
  }

  /** How many ledger rows of {@code effect} ("charge", "receipt", "paid") the key has. */
  static long effects(DSLContext dsl, String scope, String key, String effect) {
    return Ledger.rows(dsl, scope, key).stream().filter(r -> r.step().equals(effect)).count();
  }
}
