package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class WriteIdTest {

  @Test
  void nullIsRefusedWithHowToChooseAnId() {
    assertThatThrownBy(() -> WriteId.of(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is null")
        .hasMessageContaining("choose one id per intended write")
        .hasMessageContaining("without a write id if the writes are idempotent");
  }

  @ParameterizedTest
  @ValueSource(strings = {"", " ", "\t\n"})
  void blankIsRefused(String blank) {
    assertThatThrownBy(() -> WriteId.of(blank))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is blank")
        .hasMessageContaining("pass the same id to its retries");
  }

  @Test
  void longerThanTheColumnIsRefusedWithTheLengthAndTheFix() {
    String tooLong = "x".repeat(WriteId.MAX_LENGTH + 1);

    assertThatThrownBy(() -> WriteId.of(tooLong))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("256 characters long, more than 255")
        .hasMessageContaining("use a shorter id");
  }

  @Test
  void theLongestAllowedAndAUuidAreAccepted() {
    assertThat(WriteId.of("x".repeat(WriteId.MAX_LENGTH)).value()).hasSize(WriteId.MAX_LENGTH);
    assertThat(WriteId.of("3f1c2a7e-9b3d-4c55-8e0a-2b6d9f1e4c21").value())
        .isEqualTo("3f1c2a7e-9b3d-4c55-8e0a-2b6d9f1e4c21");
  }

  @Test
  void idsCompareByValue() {
    assertThat(WriteId.of("credit-order-42")).isEqualTo(new WriteId("credit-order-42"));
    assertThat(WriteId.of("a")).isNotEqualTo(WriteId.of("A"));
  }
}
