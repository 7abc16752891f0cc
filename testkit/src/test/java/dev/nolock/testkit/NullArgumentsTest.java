package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.provider.Arguments;

/**
 * NullArguments makes one call per reference parameter of every builder method and factory
 * overload, and its assertion fails a call that accepts the null, throws anything but an
 * IllegalArgumentException, or refuses it without saying "null".
 */
class NullArgumentsTest {

  /** A builder with every kind of parameter NullArguments meets; each refuses null as it should. */
  public static final class Builder {
    private final boolean acceptNullName;

    private Builder(boolean acceptNullName) {
      this.acceptNullName = acceptNullName;
    }

    public static Builder custom(String name, int size) {
      return new Builder(false).name(name);
    }

    public static Builder custom(String name, Class<?> type) {
      required(type, "custom(name, null): pass a type");
      return custom(name, 1);
    }

    public static Builder sized(int size) {
      return new Builder(false);
    }

    public Builder name(String name) {
      if (!acceptNullName) {
        required(name, "name(null): pass a name");
      }
      return this;
    }

    public Builder timeout(Duration timeout, int attempts) {
      required(timeout, "timeout(null, attempts): pass a Duration");
      return this;
    }

    public Builder setting(String key, Object value) {
      required(key, "setting(null, value): pass the key");
      required(value, "setting(key, null): pass the value");
      return this;
    }

    public Builder tags(String first, String... more) {
      required(first, "tags(null, ...): pass a tag");
      required(more, "tags(first, null): pass the other tags, or none");
      return this;
    }

    public Builder npe(String text) {
      text.length();
      return this;
    }

    public Builder vague(String text) {
      required(text, "text is missing");
      return this;
    }

    public Builder noArgument() {
      return this;
    }

    public Object build() {
      return this;
    }

    private static void required(Object value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
    }
  }

  private static final NullArguments.Values VALUES =
      NullArguments.plainValues()
          .with(String[].class, new String[] {"b", "c"})
          .with(Class.class, Long.class);

  private static List<NullArguments.Call> calls(Stream<Arguments> arguments) {
    return arguments.map(a -> (NullArguments.Call) a.get()[0]).toList();
  }

  private static NullArguments.Call call(List<NullArguments.Call> calls, String label) {
    return calls.stream().filter(c -> c.label().equals(label)).findFirst().orElseThrow();
  }

  @Test
  void oneCallPerReferenceParameterOfEveryBuilderMethodButBuild() {
    List<NullArguments.Call> calls = calls(NullArguments.of(() -> Builder.custom("b", 1), VALUES));

    assertThat(calls)
        .extracting(NullArguments.Call::label)
        .containsExactlyInAnyOrder(
            "name(null)",
            "timeout(null, int)",
            "setting(null, Object)",
            "setting(String, null)",
            "tags(null, String[])",
            "tags(String, null)",
            "npe(null)",
            "vague(null)");
  }

  @Test
  void oneCallPerReferenceParameterOfEveryOverloadOfTheFactory() {
    List<NullArguments.Call> calls =
        calls(NullArguments.ofFactory(Builder.class, "custom", VALUES));

    assertThat(calls)
        .extracting(NullArguments.Call::label)
        .containsExactlyInAnyOrder(
            "Builder.custom(null, int)",
            "Builder.custom(null, Class)",
            "Builder.custom(String, null)");
  }

  @Test
  void aFactoryWithoutAReferenceParameterIsAMistakeInTheTest() {
    assertThatThrownBy(() -> NullArguments.ofFactory(Builder.class, "sized", VALUES))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("sized");
  }

  @Test
  void aParameterTypeWithoutAPlainValueIsAMistakeInTheTest() {
    assertThatThrownBy(() -> NullArguments.of(() -> Builder.custom("b", 1), type -> null))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("No plain value");
  }

  @Test
  void everyNullRefusedAsAnIllegalArgumentThatSaysNullPasses() {
    List<NullArguments.Call> calls =
        calls(
            Stream.concat(
                NullArguments.of(() -> Builder.custom("b", 1), VALUES),
                NullArguments.ofFactory(Builder.class, "custom", VALUES)));

    calls.stream()
        .filter(c -> !c.label().startsWith("npe") && !c.label().startsWith("vague"))
        .forEach(NullArguments.Call::assertRefusedAsIllegalArgument);
  }

  @Test
  void aNullAcceptedFailsNamingTheCall() {
    NullArguments.Call call =
        call(calls(NullArguments.of(() -> new Builder(true), VALUES)), "name(null)");

    assertThatThrownBy(call::assertRefusedAsIllegalArgument)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("name(null)");
  }

  @Test
  void aNullPointerExceptionFails() {
    NullArguments.Call call =
        call(calls(NullArguments.of(() -> Builder.custom("b", 1), VALUES)), "npe(null)");

    assertThatThrownBy(call::assertRefusedAsIllegalArgument)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("NullPointerException");
  }

  @Test
  void aRefusalThatDoesNotSayNullFails() {
    NullArguments.Call call =
        call(calls(NullArguments.of(() -> Builder.custom("b", 1), VALUES)), "vague(null)");

    assertThatThrownBy(call::assertRefusedAsIllegalArgument)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("text is missing");
  }

  @Test
  void aValueForAModuleTypeMustBeOfThatType() {
    assertThatThrownBy(() -> NullArguments.plainValues().with(Duration.class, "one second"))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
