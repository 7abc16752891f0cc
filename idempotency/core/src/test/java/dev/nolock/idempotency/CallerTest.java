package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class CallerTest {

  @Test
  void aPrincipalIsOneTo255CharactersWithoutControlCharactersOrLoneSurrogates() {
    assertThat(Caller.of("u").principal()).isEqualTo("u");
    assertThat(Caller.of("x".repeat(255)).principal()).hasSize(255);
    assertThat(Caller.of("\uD83D\uDE00 émile").principal()).isEqualTo("\uD83D\uDE00 émile");

    assertThatThrownBy(() -> Caller.of(null)).hasMessageContaining("Caller.anonymous()");
    assertThatThrownBy(() -> Caller.of("")).hasMessageContaining("Caller.anonymous()");
    assertThatThrownBy(() -> Caller.of("  ")).hasMessageContaining("Caller.anonymous()");
    assertThatThrownBy(() -> Caller.of("secret-user".repeat(30)))
        .hasMessageContaining("330 characters")
        .hasMessageNotContaining("secret-user");
    assertThatThrownBy(() -> Caller.of("a\u0000b")).hasMessageContaining("control character");
    assertThatThrownBy(() -> Caller.of("a\uD800")).hasMessageContaining("surrogate");
    assertThatThrownBy(() -> Caller.of("\uDC00a")).hasMessageContaining("surrogate");
  }

  /** The anonymous caller is the empty principal, which no real principal can be. */
  @Test
  void theAnonymousCallerCannotCollideWithAPrincipal() {
    assertThat(Caller.anonymous().principal()).isEmpty();
    assertThat(Caller.anonymous().isAnonymous()).isTrue();
    assertThat(Caller.of("anonymous")).isNotEqualTo(Caller.anonymous());
    assertThat(Caller.of("a")).isEqualTo(Caller.of("a")).hasSameHashCodeAs(Caller.of("a"));
  }

  @Test
  void toStringNeverPrintsThePrincipal() {
    assertThat(Caller.of("alice@example.com")).hasToString("Caller[principal]");
    assertThat(Caller.anonymous()).hasToString("Caller[anonymous]");
  }
}
