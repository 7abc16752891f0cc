package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link Attempt#idempotencyKeyForDownstream()}: one per row of the keys table, the same for every
 * attempt of the row, never shared by two rows.
 */
@ExtendWith(PostgresExtension.class)
class DownstreamKeyIT {

  private final IdempotencyKeys<String> keys;

  DownstreamKeyIT(PostgresSchema schema) {
    this.keys = IdempotencyKeys.create(schema.dataSource(), config(), ResultCodec.utf8());
  }

  private static IdempotencyConfig config() {
    return IdempotencyConfig.custom().table("downstream_keys").build();
  }

  @BeforeAll
  static void table(PostgresSchema schema) {
    IdempotencyKeys.create(schema.dataSource(), config(), ResultCodec.utf8())
        .createTableIfMissing();
  }

  /** Runs the key once, recording the attempt's downstream key; the action's result is "done". */
  private String downstreamKeyOf(String scope, String key) {
    List<String> seen = new ArrayList<>();
    keys.execute(
        scope,
        Caller.anonymous(),
        key,
        Fingerprint.of("f"),
        attempt -> {
          seen.add(attempt.idempotencyKeyForDownstream());
          return "done";
        });
    return seen.get(0);
  }

  /** Runs the key once with an action that records its downstream key and fails (released). */
  private void failingAttempt(String scope, String key, List<String> seen) {
    assertThatThrownBy(
            () ->
                keys.execute(
                    scope,
                    Caller.anonymous(),
                    key,
                    Fingerprint.of("f"),
                    attempt -> {
                      seen.add(attempt.idempotencyKeyForDownstream());
                      throw new IllegalStateException("the provider timed out");
                    }))
        .hasMessage("the provider timed out");
  }

  /**
   * Scope "a" with key "b:c" and scope "a:b" with key "c" are two requests. Before, both sent the
   * provider "a:b:c", so the second got the first one's charge back instead of its own.
   */
  @Test
  void twoKeysWhoseScopeAndKeyJoinToTheSameTextGetDifferentDownstreamKeys() {
    String suffix = UUID.randomUUID().toString();
    String first = downstreamKeyOf("a", "b:c" + suffix);
    String second = downstreamKeyOf("a:b", "c" + suffix);

    assertThat(first).isNotEqualTo(second);
  }

  /**
   * A takeover (attempt 2 of the same row, after attempt 1 failed and released the key) repeats the
   * downstream call with the first attempt's downstream key: the provider answers it from its own
   * store instead of charging again.
   */
  @Test
  void aTakeoverKeepsTheRowsDownstreamKey() {
    String key = UUID.randomUUID().toString();
    List<String> seen = new ArrayList<>();
    failingAttempt("s", key, seen);
    List<Integer> numbers = new ArrayList<>();
    keys.execute(
        "s",
        Caller.anonymous(),
        key,
        Fingerprint.of("f"),
        attempt -> {
          numbers.add(attempt.number());
          seen.add(attempt.idempotencyKeyForDownstream());
          return "done";
        });

    assertThat(numbers).containsExactly(2);
    assertThat(seen).hasSize(2);
    assertThat(seen.get(1)).isEqualTo(seen.get(0));
  }

  /**
   * A key forgotten by an operator and used again is a new request: a new row, so a new downstream
   * key, or the provider would answer the new request with the forgotten one's result. Before, the
   * downstream key was the same text both times.
   */
  @Test
  void aKeyUsedAgainAfterItWasForgottenGetsANewDownstreamKey() {
    String key = UUID.randomUUID().toString();
    List<String> seen = new ArrayList<>();
    failingAttempt("s", key, seen);
    assertThat(keys.forget("s", Caller.anonymous(), key)).isTrue();

    String again = downstreamKeyOf("s", key);

    assertThat(again).isNotEqualTo(seen.get(0));
  }
}
