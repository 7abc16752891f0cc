package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Instant;
import org.junit.jupiter.api.Test;

class AbandonedKeyTest {

  /**
   * An abandoned key's {@code toString()}, which ends up in logs, shows neither the key (a bearer
   * secret for an anonymous caller's stored result) nor the caller, like {@link Attempt}'s. Before:
   * the record's own toString printed the key.
   */
  @Test
  void toStringShowsNeitherTheKeyNorTheCaller() {
    AbandonedKey abandoned =
        new AbandonedKey(
            "payments.create",
            Caller.of("alice-principal"),
            "secret-key-123",
            "charged",
            3,
            Instant.parse("2024-01-01T00:00:00Z"),
            Instant.parse("2024-01-02T00:00:00Z"));

    assertThat(abandoned.toString())
        .doesNotContain("secret-key-123")
        .doesNotContain("alice-principal")
        .contains("payments.create", "charged", "3");
  }
}
