package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class NamesTest {

  @Test
  void aPlainNamePasses() {
    assertThat(Names.requireName("lock name", "invoice-42", 255)).isEqualTo("invoice-42");
  }

  @Test
  void blankTooLongAndControlCharactersAreRefused() {
    assertThatThrownBy(() -> Names.requireName("lock name", " ", 255))
        .hasMessageContaining("lock name is blank");
    assertThatThrownBy(() -> Names.requireName("lock name", null, 255))
        .hasMessageContaining("lock name is null");
    assertThatThrownBy(() -> Names.requireName("lock name", "x".repeat(256), 255))
        .hasMessageContaining("256 characters long, more than 255");
    assertThatThrownBy(() -> Names.requireName("lock name", "a\nb", 255))
        .hasMessageContaining("control character at index 1");
  }

  @Test
  void halfASurrogatePairIsRefusedAndAWholeOnePasses() {
    // Control: what the refusal prevents, two names that UTF-8 makes one key.
    assertThat("a\uD800".getBytes(StandardCharsets.UTF_8))
        .isEqualTo("a?".getBytes(StandardCharsets.UTF_8));

    assertThatThrownBy(() -> Names.requireName("lock name", "a\uD800", 255))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("half of a surrogate pair at index 1");
    assertThatThrownBy(() -> Names.requireName("lock name", "\uDC00b", 255))
        .hasMessageContaining("half of a surrogate pair at index 0");
    assertThatThrownBy(() -> Names.requireName("lock name", "a\uDBFF\uDBFFb", 255))
        .hasMessageContaining("half of a surrogate pair at index 1");
    assertThat(Names.requireName("lock name", "invoice-\uD83D\uDCB3", 255))
        .isEqualTo("invoice-\uD83D\uDCB3");
  }
}
