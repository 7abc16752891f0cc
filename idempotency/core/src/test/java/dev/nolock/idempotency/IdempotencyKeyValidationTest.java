package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class IdempotencyKeyValidationTest {

  @Test
  void uuidsUlidsAndBase64UrlTokensAreValidKeys() {
    for (String key :
        new String[] {
          UUID.randomUUID().toString(),
          "01ARZ3NDEKTSV4RRFFQ69G5FAV",
          "dGhpcyBpcyBhIHRva2Vu_-",
          "k".repeat(IdempotencyKeys.MAX_KEY_LENGTH),
          "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
        }) {
      assertThat(IdempotencyKeys.requireValidKey(key)).isEqualTo(key);
    }
  }

  @Test
  void aMissingKeyIsRefusedWithAMessageThatSaysWhatToSend() {
    assertThatThrownBy(() -> IdempotencyKeys.requireValidKey(null))
        .isInstanceOf(InvalidIdempotencyKeyException.class)
        .hasMessageContaining("missing")
        .hasMessageContaining("UUID");
    assertThatThrownBy(() -> IdempotencyKeys.requireValidKey(""))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
  }

  @Test
  void aKeyLongerThan255CharactersIsRefused() {
    assertThatThrownBy(
            () -> IdempotencyKeys.requireValidKey("k".repeat(IdempotencyKeys.MAX_KEY_LENGTH + 1)))
        .isInstanceOf(InvalidIdempotencyKeyException.class)
        .hasMessageContaining("256 characters");
  }

  @ParameterizedTest
  @ValueSource(strings = {"has space", "tab\there", "new\nline", "nul\0", "caf\u00e9", "del\u007f"})
  void keysWithSpacesControlCharactersOrNonAsciiAreRefusedWithoutEchoingTheKey(String key) {
    assertThatThrownBy(() -> IdempotencyKeys.requireValidKey(key))
        .isInstanceOf(InvalidIdempotencyKeyException.class)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("visible ASCII")
        .hasMessageNotContaining(key);
  }
}
