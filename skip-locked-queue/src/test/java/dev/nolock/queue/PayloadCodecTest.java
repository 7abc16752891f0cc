package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class PayloadCodecTest {

  @Test
  void utf8RoundTripsAnyString() {
    String text = "grüße, 日本, 🚀";
    assertThat(PayloadCodec.utf8().decode(PayloadCodec.utf8().encode(text))).isEqualTo(text);
  }

  @Test
  void bytesAreCopiedSoTheCallerCannotChangeAStoredPayload() {
    byte[] original = {1, 2, 3};
    byte[] encoded = PayloadCodec.bytes().encode(original);
    original[0] = 9;
    assertThat(encoded).containsExactly(1, 2, 3);
    byte[] decoded = PayloadCodec.bytes().decode(encoded);
    decoded[1] = 9;
    assertThat(encoded).containsExactly(1, 2, 3);
  }

  @Test
  void aCodecThatEncodesToNullIsCaughtAtEnqueueTime() {
    PayloadCodec<String> broken = PayloadCodec.of(s -> null, b -> "");
    assertThatThrownBy(() -> broken.encode("x")).hasMessageContaining("empty array");
    assertThatThrownBy(() -> PayloadCodec.utf8().encode(null))
        .isInstanceOf(NullPointerException.class);
  }
}
