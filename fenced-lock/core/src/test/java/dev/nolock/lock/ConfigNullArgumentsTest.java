package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.NullArguments;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every public configuration method of this module, called with a null argument, throws an
 * IllegalArgumentException that names what is null, never a NullPointerException.
 */
class ConfigNullArgumentsTest {

  static Stream<Arguments> lockConfig() {
    return NullArguments.of(
        () -> LockConfig.custom(LockPurpose.CORRECTNESS), NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("lockConfig")
  void lockConfigRefusesNull(NullArguments.Call call) {
    refusedAsIllegalArgument(call);
  }

  static Stream<Arguments> electorConfig() {
    return NullArguments.of(() -> ElectorConfig.custom("election"), NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("electorConfig")
  void electorConfigRefusesNull(NullArguments.Call call) {
    refusedAsIllegalArgument(call);
  }

  @Test
  void theFactoriesRefuseNullAsAnIllegalArgument() {
    assertThatThrownBy(() -> LockConfig.custom(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
    assertThatThrownBy(() -> ElectorConfig.custom(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  private static void refusedAsIllegalArgument(NullArguments.Call call) {
    assertThatThrownBy(call.invoke()::run)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  @Test
  void anElectorsRegistryIsAbsentUnlessMetricsAreConfigured() {
    io.micrometer.core.instrument.simple.SimpleMeterRegistry registry =
        new io.micrometer.core.instrument.simple.SimpleMeterRegistry();

    org.assertj.core.api.Assertions.assertThat(
            ElectorConfig.custom("billing-leader").build().registry())
        .isEmpty();
    org.assertj.core.api.Assertions.assertThat(
            ElectorConfig.custom("billing-leader").metrics(registry, "billing").build().registry())
        .containsExactly(registry);
  }

  @Test
  void anElectorsMetricsAreTaggedWithTheConfiguredInstanceName() {
    io.micrometer.core.instrument.simple.SimpleMeterRegistry registry =
        new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
    try (LeaderElector elector =
        LeaderElector.start(
            new InMemoryLockBackend(),
            ElectorConfig.custom("billing-leader").metrics(registry, "billing").build(),
            new Leadership() {
              @Override
              public void onStartedLeading(HeldLock leadership) {}

              @Override
              public void onStoppedLeading() {}
            })) {
      org.assertj.core.api.Assertions.assertThat(
              registry
                  .get("nolock.leadership.changes")
                  .tags("component", "election", "name", "billing")
                  .counter())
          .isNotNull();
    }
  }
}
