package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import org.junit.jupiter.api.Test;

class FenceAuditorTest {

  private final FenceAuditor auditor = new FenceAuditor();

  @Test
  void aLowerTokenAcceptedAfterAHigherOneIsALostUpdate() {
    auditor.accepted("l", FencingToken.of(34), "B");
    auditor.accepted("l", FencingToken.of(33), "A");

    assertThat(auditor.staleAcceptances())
        .singleElement()
        .extracting(FenceAuditor.Entry::owner)
        .isEqualTo("A");
    assertThatThrownBy(auditor::assertNoStaleWriteAccepted)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("Lost update")
        .hasMessageContaining("token=33 owner=A");
  }

  @Test
  void anEqualTokenFromAnotherOwnerIsALostUpdateButFromTheSameOwnerItIsNot() {
    auditor.accepted("l", FencingToken.of(7), "A");
    auditor.accepted("l", FencingToken.of(7), "A");
    assertThat(auditor.staleAcceptances()).isEmpty();

    auditor.accepted("l", FencingToken.of(7), "B");
    assertThat(auditor.staleAcceptances()).hasSize(1);
  }

  @Test
  void risingTokensRefusalsAndOtherLocksAreFine() {
    auditor.attempted("l", FencingToken.of(1), "A");
    auditor.accepted("l", FencingToken.of(1), "A");
    auditor.accepted("l", FencingToken.of(2), "B");
    auditor.refused("l", FencingToken.of(1), "A");
    auditor.accepted("other", FencingToken.of(1), "C");

    assertThatCode(auditor::assertNoStaleWriteAccepted).doesNotThrowAnyException();
    assertThat(auditor.attempts("A")).isEqualTo(1);
    assertThat(auditor.refusals("A")).isEqualTo(1);
    assertThat(auditor.acceptances("B")).isEqualTo(1);
    assertThat(auditor.timeline()).contains("#4 REFUSED   lock=l token=1 owner=A");
  }
}
