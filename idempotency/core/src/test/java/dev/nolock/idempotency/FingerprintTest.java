package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class FingerprintTest {

  @Test
  void sha256FramesEachPartSoThatShiftedBoundariesDiffer() {
    assertThat(Fingerprint.sha256("ab", "c")).isNotEqualTo(Fingerprint.sha256("a", "bc"));
    assertThat(Fingerprint.sha256("POST", "/x", "{}"))
        .isEqualTo(Fingerprint.sha256("POST", "/x", "{}"));
    assertThat(Fingerprint.sha256("a").value()).hasSize(64).matches("[0-9a-f]{64}");
  }

  @Test
  void aFingerprintIsOneTo255PrintableAsciiCharacters() {
    assertThat(Fingerprint.of("amount=100 EUR").value()).isEqualTo("amount=100 EUR");
    assertThatThrownBy(() -> Fingerprint.of("")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Fingerprint.of("x".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> Fingerprint.of("line\nbreak"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sha256");
  }
}
