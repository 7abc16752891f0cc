package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;

class NewJobTest {

  @Test
  void eachSetterReturnsAValidatedCopy() {
    NewJob<String> plain = NewJob.of("p");
    NewJob<String> keyed = plain.uniqueKey("k").maxAttempts(3).delay(Duration.ofMinutes(5));

    assertThat(plain.uniqueKey()).isEmpty();
    assertThat(plain.delay()).isZero();
    assertThat(plain.maxAttempts()).isEmpty();
    assertThat(keyed.uniqueKey()).contains("k");
    assertThat(keyed.maxAttempts()).contains(3);
    assertThat(keyed.delay()).isEqualTo(Duration.ofMinutes(5));
    assertThat(keyed.payload()).isEqualTo("p");
  }

  @Test
  void runAtAndDelayAreAlternatives() {
    assertThatThrownBy(() -> NewJob.of("p").delay(Duration.ofSeconds(1)).runAt(Instant.now()))
        .hasMessageContaining("either runAt or delay");
    assertThatThrownBy(() -> NewJob.of("p").runAt(Instant.now()).delay(Duration.ofSeconds(1)))
        .hasMessageContaining("either runAt or delay");
  }

  @Test
  void badValuesAreRefused() {
    assertThatThrownBy(() -> NewJob.of(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("payload is null");
    assertThatThrownBy(() -> NewJob.of("p").delay(Duration.ofSeconds(-1)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NewJob.of("p").delay(Duration.ofDays(400)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NewJob.of("p").uniqueKey(" "))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NewJob.of("p").uniqueKey("k".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> NewJob.of("p").maxAttempts(0))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
