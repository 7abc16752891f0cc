package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The fingerprint check and its negative control: a second, different request with the same key
 * must be refused; with the check switched off it is answered with the first request's result, and
 * the audit below catches that wrong replay.
 */
@ExtendWith(PostgresExtension.class)
class FingerprintNegativeControlIT {

  private final PostgresSchema schema;

  FingerprintNegativeControlIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void tables(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.utf8())
        .createTableIfMissing();
    Ledger.create(schema.dsl());
  }

  /** A refund of {@code amount}; its result names the amount refunded. */
  private static Outcome<String> refund(IdempotencyKeys<String> keys, String key, int amount) {
    return keys.execute(
        "refunds",
        Caller.anonymous(),
        key,
        Fingerprint.sha256("POST", "/refunds", "amount=" + amount),
        attempt -> {
          Ledger.write(attempt, "refund " + amount);
          return "refunded " + amount;
        });
  }

  /**
   * The audit: a request answered with a result that is not about this request. A replay is only
   * right for the request that produced it.
   */
  private static boolean wronglyReplayed(Outcome<String> outcome, int requestedAmount) {
    return outcome instanceof Outcome.Replayed<String> replayed
        && !replayed.result().equals("refunded " + requestedAmount);
  }

  private IdempotencyKeys<String> keys(Safeguards safeguards) {
    return IdempotencyKeys.withSafeguards(
        schema.dataSource(),
        IdempotencyConfig.ofDefaults(),
        ResultCodec.utf8(),
        FailurePolicy.releaseOnEveryFailure(),
        safeguards);
  }

  @Test
  void aDifferentRequestWithTheSameKeyIsRefusedNotAnsweredWithTheFirstResult() {
    IdempotencyKeys<String> keys = keys(Safeguards.ALL);
    String key = UUID.randomUUID().toString();
    refund(keys, key, 100);

    Outcome<String> second = refund(keys, key, 50);

    assertThat(second).isInstanceOf(Outcome.KeyReusedWithDifferentRequest.class);
    assertThat(wronglyReplayed(second, 50)).isFalse();
    assertThat(Ledger.rows(schema.dsl(), "refunds", key))
        .extracting(Ledger.Row::step)
        .containsExactly("refund 100");
  }

  @Test
  void negativeControlWithoutTheFingerprintCheckTheDifferentRequestIsWronglyReplayed() {
    IdempotencyKeys<String> keys = keys(new Safeguards(false, true));
    String key = UUID.randomUUID().toString();
    refund(keys, key, 100);

    Outcome<String> second = refund(keys, key, 50);

    assertThat(second).isEqualTo(new Outcome.Replayed<>("refunded 100"));
    assertThat(wronglyReplayed(second, 50)).as("the audit catches the wrong replay").isTrue();
    assertThat(wronglyReplayed(refund(keys, key, 100), 100))
        .as("the audit does not flag the right replay")
        .isFalse();
  }
}
