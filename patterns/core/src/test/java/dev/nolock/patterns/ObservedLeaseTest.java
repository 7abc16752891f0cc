package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vavr.control.Option;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ObservedLeaseTest {

  private static final LeaseHolder A = new LeaseHolder("A", FencingToken.of(3));

  private static ObservedLease held(Duration waitLeft) {
    return new ObservedLease(
        Option.some(A), Option.some("r"), Option.some(Duration.ofSeconds(10)), waitLeft);
  }

  private static ObservedLease free() {
    return new ObservedLease(
        Option.none(), Option.some("r"), Option.some(Duration.ofSeconds(10)), Duration.ZERO);
  }

  @Test
  void anObservedLeaseIsExpiredWhenFreeOrWhenNoWaitIsLeft() {
    ObservedLease waiting = held(Duration.ofMillis(1));

    assertThat(waiting.isExpired()).isFalse();
    assertThat(waiting.isFree()).isFalse();
    assertThat(held(Duration.ZERO).isExpired()).isTrue();
    assertThat(held(Duration.ZERO).isFree()).isFalse();
    assertThat(free().isExpired()).isTrue();
    assertThat(free().isFree()).isTrue();
  }

  @Test
  void theLiveHolderIsTheHolderOfAnUnexpiredLeaseOnly() {
    assertThat(held(Duration.ofMillis(1)).liveHolder()).containsExactly(A);
    assertThat(held(Duration.ZERO).liveHolder()).as("expired").isEmpty();
    assertThat(held(Duration.ZERO).holder())
        .as("an expired lease names its last holder")
        .contains(A);
    assertThat(free().liveHolder()).isEmpty();
  }

  @Test
  void aWaitForAFreeLeaseOrANegativeWaitIsRefused() {
    assertThatThrownBy(
            () ->
                new ObservedLease(
                    Option.none(), Option.none(), Option.none(), Duration.ofSeconds(1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("free lease");
    assertThatThrownBy(() -> held(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("waitLeft");
  }
}
