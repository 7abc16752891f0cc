package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

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
}
