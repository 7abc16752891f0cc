package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class ResultCodecTest {

  @Test
  void utf8RoundTripsAnyString() {
    ResultCodec<String> codec = ResultCodec.utf8();
    String text = "Zahlung über 100 € bestätigt ✓";

    assertThat(codec.decode(codec.encode(text))).isEqualTo(text);
    assertThatThrownBy(() -> codec.encode(null)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aStoredResultIsImmutableAndComparedByContent() {
    byte[] body = {1, 2, 3};
    StoredResult stored = StoredResult.of(201, body);
    body[0] = 9;
    stored.body()[1] = 9;

    assertThat(stored.body()).containsExactly(1, 2, 3);
    assertThat(stored).isEqualTo(StoredResult.of(201, new byte[] {1, 2, 3}));
    assertThat(stored).isNotEqualTo(StoredResult.of(200, new byte[] {1, 2, 3}));
    assertThat(ResultCodec.identity().decode(ResultCodec.identity().encode(stored)))
        .isEqualTo(stored);
  }
}
