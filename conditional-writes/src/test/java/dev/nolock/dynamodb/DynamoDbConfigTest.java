package dev.nolock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.Test;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

class DynamoDbConfigTest {

  @Test
  void tableNamesFollowDynamoDbsRules() {
    assertThat(
            DynamoDbVersionedStoreConfig.custom("a.b-c_9", AttributeCodec.longs())
                .build()
                .tableName())
        .isEqualTo("a.b-c_9");
    assertThat(DynamoDbFenceConfig.custom("x".repeat(255)).build().tableName()).hasSize(255);

    for (String bad : new String[] {"ab", "x".repeat(256), "has space", "semi;colon", "ä-umlaut"}) {
      assertThatThrownBy(() -> DynamoDbVersionedStoreConfig.custom(bad, AttributeCodec.longs()))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("[a-zA-Z0-9_.-]");
      assertThatThrownBy(() -> DynamoDbFenceConfig.custom(bad))
          .isInstanceOf(IllegalArgumentException.class);
    }
    assertThatThrownBy(() -> DynamoDbFenceConfig.custom(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  @Test
  void attributeNamesMayBeReservedWordsButMustBeDistinct() {
    DynamoDbVersionedStoreConfig<Long> config =
        DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
            .keyAttribute("name")
            .valueAttribute("value")
            .versionAttribute("size")
            .build();
    assertThat(config.keyAttribute()).isEqualTo("name");

    assertThatThrownBy(
            () ->
                DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                    .valueAttribute("rvn")
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("three different attributes");
    assertThatThrownBy(
            () ->
                DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                    .keyAttribute(""))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(
            () ->
                DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                    .versionAttribute("x".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("255 bytes");
    assertThatThrownBy(
            () ->
                DynamoDbFenceConfig.custom("orders")
                    .tokenAttribute("t")
                    .ownerAttribute("t")
                    .build())
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theMetricsInstanceDefaultsToTheTableNameCutToTheTagLimit() {
    assertThat(
            DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                .build()
                .instanceName())
        .isEqualTo("orders");
    assertThatThrownBy(
            () ->
                DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                    .metrics(new SimpleMeterRegistry(), " "))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(
            DynamoDbVersionedStoreConfig.custom("t".repeat(255), AttributeCodec.longs())
                .build()
                .instanceName())
        .as("cut to what a metrics tag allows")
        .hasSize(100);
  }

  @Test
  void theRegistryIsAbsentUnlessMetricsAreConfigured() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();

    assertThat(
            DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                .build()
                .registry())
        .isEmpty();
    assertThat(
            DynamoDbVersionedStoreConfig.custom("orders", AttributeCodec.longs())
                .metrics(registry, "orders")
                .build()
                .registry())
        .containsExactly(registry);
  }

  @Test
  void codecsRoundTripAndRefuseTheWrongType() {
    assertThat(AttributeCodec.longs().decode(AttributeCodec.longs().encode(Long.MIN_VALUE)))
        .isEqualTo(Long.MIN_VALUE);
    assertThat(AttributeCodec.longs().encode(42L)).isEqualTo(AttributeValue.fromN("42"));
    assertThat(AttributeCodec.strings().decode(AttributeCodec.strings().encode("ä€")))
        .isEqualTo("ä€");

    assertThatThrownBy(() -> AttributeCodec.longs().decode(AttributeValue.fromS("1")))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> AttributeCodec.longs().decode(AttributeValue.fromN("1.5")))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> AttributeCodec.strings().decode(AttributeValue.fromN("1")))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
