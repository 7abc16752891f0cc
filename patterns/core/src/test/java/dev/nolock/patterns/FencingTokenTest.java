package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.LongRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

class FencingTokenTest {

  @Test
  void zeroIsRefusedWithAMessageThatSaysWhy() {
    assertThatThrownBy(() -> FencingToken.of(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least 1, got 0");
  }

  @Property
  void negativeValuesAreRefused(@ForAll @LongRange(min = Long.MIN_VALUE, max = 0) long value) {
    assertThatThrownBy(() -> FencingToken.of(value)).isInstanceOf(IllegalArgumentException.class);
  }

  @Property
  void orderFollowsTheValue(
      @ForAll @LongRange(min = 1) long a, @ForAll @LongRange(min = 1) long b) {
    FencingToken ta = FencingToken.of(a);
    FencingToken tb = FencingToken.of(b);
    assertThat(Integer.signum(ta.compareTo(tb))).isEqualTo(Long.compare(a, b));
    assertThat(ta.isNewerThan(tb)).isEqualTo(a > b);
    assertThat(ta.equals(tb)).isEqualTo(a == b);
  }

  @Property
  void sortingTokensSortsTheirValues(
      @ForAll @Size(max = 50) List<@LongRange(min = 1) Long> values) {
    List<FencingToken> tokens = new ArrayList<>();
    values.forEach(v -> tokens.add(FencingToken.of(v)));
    Collections.sort(tokens);
    List<Long> sorted = new ArrayList<>(values);
    Collections.sort(sorted);
    assertThat(tokens).extracting(FencingToken::value).containsExactlyElementsOf(sorted);
  }
}
