package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;

/** {@link ErrorDescriber}: what each describer keeps of a failure, and the safe fallback. */
class ErrorDescriberTest {

  private static final String CARD = "4111-1111-1111-1111";

  private static RuntimeException declined() {
    return new IllegalStateException(
        "card " + CARD + " declined",
        new UncheckedIOException(
            "gateway said " + CARD,
            new IOException("socket", new SQLException("Key (card)=(" + CARD + ")", "23505"))));
  }

  @Test
  void theDefaultNamesEveryClassOfTheChainAndTheSqlStateButNoMessage() {
    assertThat(ErrorDescriber.classNames().describe(declined()))
        .isEqualTo(
            "java.lang.IllegalStateException; caused by java.io.UncheckedIOException; caused by"
                + " java.io.IOException; caused by java.sql.SQLException [SQLSTATE 23505]");
  }

  /** The negative control: the same chain with messages carries the card number. */
  @Test
  void messagesKeepEachMessage() {
    assertThat(ErrorDescriber.messages().describe(declined()))
        .startsWith("java.lang.IllegalStateException: card " + CARD + " declined; caused by")
        .endsWith("java.sql.SQLException [SQLSTATE 23505]: Key (card)=(" + CARD + ")");
  }

  @Test
  void stackTracesKeepTheWholeTrace() {
    assertThat(ErrorDescriber.stackTraces().describe(declined()))
        .startsWith("java.lang.IllegalStateException: card " + CARD + " declined")
        .contains("at dev.nolock.patterns.ErrorDescriberTest.declined")
        .contains("Caused by: java.sql.SQLException: Key (card)=(" + CARD + ")");
  }

  @Test
  void aCycleOrAVeryLongChainEnds() {
    RuntimeException a = new RuntimeException("a");
    RuntimeException b = new RuntimeException("b", a);
    a.initCause(b);
    assertThat(ErrorDescriber.classNames().describe(a))
        .isEqualTo("java.lang.RuntimeException; caused by java.lang.RuntimeException");

    Throwable deep = new IllegalStateException();
    for (int i = 0; i < 100; i++) {
      deep = new RuntimeException(deep);
    }
    assertThat(ErrorDescriber.classNames().describe(deep))
        .endsWith("; caused by ...")
        .doesNotContain("IllegalStateException");
  }

  @Test
  void aDescriberThatThrowsOrReturnsNullIsReplacedByTheClassNames() {
    ErrorDescriber throwing =
        e -> {
          throw new UnsupportedOperationException(e.getMessage());
        };
    assertThat(ErrorDescriber.describe(throwing, new IllegalStateException(CARD)))
        .isEqualTo(
            "java.lang.IllegalStateException (the error describer threw"
                + " java.lang.UnsupportedOperationException)");
    assertThat(ErrorDescriber.describe(e -> null, new IllegalStateException(CARD)))
        .isEqualTo("java.lang.IllegalStateException (the error describer returned null)");
    assertThat(ErrorDescriber.describe(ErrorDescriber.messages(), new IllegalStateException(CARD)))
        .isEqualTo("java.lang.IllegalStateException: " + CARD);
  }

  @Test
  void nullIsAConfigurationErrorThatSaysWhatToPass() {
    assertThatThrownBy(() -> ErrorDescriber.require(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("ErrorDescriber.classNames()");
    assertThatThrownBy(() -> ErrorDescriber.describe(null, new IllegalStateException()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> ErrorDescriber.describe(ErrorDescriber.classNames(), null))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
