package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every public configuration method of the core, called with a null argument, throws an
 * IllegalArgumentException that names what is null, never a NullPointerException.
 */
class ConfigNullArgumentsTest {

  static Stream<Arguments> calls() {
    return Stream.of(
        call("RetryPolicy.Builder.maxElapsed(null)", () -> RetryPolicy.custom().maxElapsed(null)),
        call("RetryPolicy.Builder.baseDelay(null)", () -> RetryPolicy.custom().baseDelay(null)),
        call("RetryPolicy.Builder.maxDelay(null)", () -> RetryPolicy.custom().maxDelay(null)),
        call(
            "RetryPolicy.run(null, attempt)",
            () -> RetryPolicy.custom().build().run(null, () -> io.vavr.control.Either.right(1))),
        call(
            "CoordinationMetrics.of(null, component, instance)",
            () -> CoordinationMetrics.of(null, "lock", "billing")),
        call(
            "CoordinationMetrics.of(registry, component, null)",
            () -> CoordinationMetrics.of(new SimpleMeterRegistry(), "lock", null)));
  }

  private static Arguments call(String label, Runnable call) {
    return Arguments.of(label, (Consumer<Void>) ignored -> call.run());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("calls")
  void aNullArgumentIsAnIllegalArgumentThatSaysSo(String label, Consumer<Void> call) {
    assertThatThrownBy(() -> call.accept(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }
}
