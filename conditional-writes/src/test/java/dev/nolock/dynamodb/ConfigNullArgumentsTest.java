package dev.nolock.dynamodb;

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

  static Stream<Arguments> dynamoDbFenceConfig() {
    return NullArguments.of(
        () -> DynamoDbFenceConfig.custom("nolock"), NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("dynamoDbFenceConfig")
  void dynamoDbFenceConfigRefusesNull(NullArguments.Call call) {
    refusedAsIllegalArgument(call);
  }

  static Stream<Arguments> dynamoDbVersionedStoreConfig() {
    return NullArguments.of(
        () -> DynamoDbVersionedStoreConfig.custom("nolock", AttributeCodec.longs()),
        NullArguments.plainValues());
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("dynamoDbVersionedStoreConfig")
  void dynamoDbVersionedStoreConfigRefusesNull(NullArguments.Call call) {
    refusedAsIllegalArgument(call);
  }

  @Test
  void theFactoriesRefuseNullAsAnIllegalArgument() {
    assertThatThrownBy(() -> DynamoDbFenceConfig.custom(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
    assertThatThrownBy(() -> DynamoDbVersionedStoreConfig.custom(null, AttributeCodec.longs()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
    assertThatThrownBy(() -> DynamoDbVersionedStoreConfig.custom("nolock", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  private static void refusedAsIllegalArgument(NullArguments.Call call) {
    assertThatThrownBy(call.invoke()::run)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }
}
