package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.NullArguments;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every public configuration method of this module, called with a null argument, throws an
 * IllegalArgumentException that names what is null, never a NullPointerException.
 */
class ConfigNullArgumentsTest {

  static Stream<Arguments> dynamoDbLockBackendConfig() {
    return NullArguments.of(() -> DynamoDbLockBackendConfig.custom(), NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("dynamoDbLockBackendConfig")
  void dynamoDbLockBackendConfigRefusesNull(NullArguments.Call call) {
    refusedAsIllegalArgument(call);
  }

  private static void refusedAsIllegalArgument(NullArguments.Call call) {
    assertThatThrownBy(call.invoke()::run)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }
}
