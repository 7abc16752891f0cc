package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.NullArguments;
import java.time.Duration;
import java.util.stream.Stream;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class OwnershipConfigTest {

  /** A handler's validation error: the record itself is poison. */
  private static final java.util.function.Predicate<Throwable> POISON =
      e -> e instanceof IllegalArgumentException;

  private static OwnershipConfig.Builder builder() {
    return OwnershipConfig.custom("127.0.0.1:9092", "orders", "order-appliers");
  }

  @Test
  void defaultsAreTheDocumentedOnes() {
    OwnershipConfig config = builder().build();
    assertThat(config.table()).isEqualTo("nolock_partition_owners");
    assertThat(config.tableName()).isEqualTo(DSL.name("nolock_partition_owners"));
    assertThat(config.ownerId()).matches("\\d+-[0-9a-f]{8}");
    assertThat(config.pollTimeout()).isEqualTo(Duration.ofMillis(500));
    assertThat(config.maxPollRecords()).isEqualTo(100);
    assertThat(config.sessionTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(config.maxPollInterval()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.safetyMargin()).isEqualTo(Duration.ofSeconds(2));
    assertThat(config.commitInterval()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.transactionIdleTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.retryBaseDelay()).isEqualTo(Duration.ofMillis(100));
    assertThat(config.retryMaxDelay()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.closeTimeout()).isEqualTo(Duration.ofSeconds(30));
    assertThat(config.meterRegistry()).isEmpty();
    assertThat(config.metricsInstanceName()).isEmpty();
    assertThat(config.consumerProperties()).isEmpty();
    assertThat(config.usesConsumerGroupProtocol()).isFalse();
  }

  @Test
  void twoInstancesGetDifferentDefaultOwnerIds() {
    assertThat(builder().build().ownerId()).isNotEqualTo(builder().build().ownerId());
  }

  @Test
  void aQualifiedTableNameIsAccepted() {
    assertThat(builder().table("app.owners").build().tableName())
        .isEqualTo(DSL.name("app", "owners"));
  }

  @Test
  void malformedNamesAreRefused() {
    assertThatThrownBy(() -> OwnershipConfig.custom(" ", "orders", "g"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("bootstrap.servers");
    assertThatThrownBy(() -> OwnershipConfig.custom("h:1", "no spaces", "g"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a Kafka topic name");
    assertThatThrownBy(() -> OwnershipConfig.custom("h:1", "orders", ""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("consumer group id");
    assertThatThrownBy(() -> builder().table("Owners; DROP TABLE x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("plain SQL identifier");
    assertThatThrownBy(() -> builder().ownerId("a\nb"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }

  @Test
  void durationsOutOfRangeAreRefused() {
    assertThatThrownBy(() -> builder().sessionTimeout(Duration.ofMillis(500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sessionTimeout");
    assertThatThrownBy(() -> builder().pollTimeout(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder().maxPollRecords(0))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> builder().queryTimeout(Duration.ofHours(1)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aSafetyMarginAsLongAsTheSessionTimeoutIsRefused() {
    assertThatThrownBy(
            () ->
                builder()
                    .sessionTimeout(Duration.ofSeconds(3))
                    .safetyMargin(Duration.ofSeconds(3))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no record could ever be applied");
  }

  @Test
  void aPollTimeoutOverHalfTheClaimWindowIsRefused() {
    // Defaults: sessionTimeout 10 s - safetyMargin 2 s = 8 s, half of it 4 s.
    assertThatThrownBy(() -> builder().pollTimeout(Duration.ofSeconds(4).plusMillis(1)).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pollTimeout (PT4.001S) must be at most half of")
        .hasMessageContaining("sessionTimeout - safetyMargin (PT10S - PT2S = PT8S)")
        .hasMessageContaining("Lower pollTimeout to PT4S or less");
    assertThatThrownBy(
            () ->
                builder()
                    .pollTimeout(Duration.ofSeconds(1).plusMillis(1))
                    .sessionTimeout(Duration.ofSeconds(3))
                    .safetyMargin(Duration.ofSeconds(1))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("pollTimeout (PT1.001S)")
        .hasMessageContaining("Lower pollTimeout to PT1S or less");
    assertThat(builder().pollTimeout(Duration.ofSeconds(4)).build().pollTimeout())
        .as("exactly half the claim window")
        .isEqualTo(Duration.ofSeconds(4));
  }

  @Test
  void aMaxPollIntervalBelowTheSessionTimeoutIsRefused() {
    assertThatThrownBy(
            () ->
                builder()
                    .sessionTimeout(Duration.ofSeconds(20))
                    .maxPollInterval(Duration.ofSeconds(10))
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least as long");
  }

  @Test
  void consumerSettingsTheRunnerOwnsAreRefusedWithTheSetterToUse() {
    assertThatThrownBy(() -> builder().consumerProperty("enable.auto.commit", true))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the runner");
    assertThatThrownBy(() -> builder().consumerProperty("session.timeout.ms", 3000))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("sessionTimeout(...)");
    assertThatThrownBy(() -> builder().consumerProperty("auto.offset.reset", "earliest"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("last applied offset");
    assertThat(builder().consumerProperty("client.id", "me").build().consumerProperties())
        .containsEntry("client.id", "me");
  }

  @Test
  void theKip848ProtocolRefusesTheClientSideGroupSettings() {
    assertThat(
            builder()
                .consumerProperty("group.protocol", "consumer")
                .build()
                .usesConsumerGroupProtocol())
        .isTrue();
    assertThatThrownBy(
            () ->
                builder()
                    .consumerProperty("group.protocol", "consumer")
                    .consumerProperty("partition.assignment.strategy", "x")
                    .build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the broker decides it");
  }

  @Test
  void theDeadLetterTopicIsOptInAndValidatedAsAKafkaTopicName() {
    assertThat(builder().build().deadLetterTopic()).as("none by default: stop").isEmpty();
    assertThat(
            builder()
                .deadLetterTopic("orders.dlt")
                .deadLetterWhen(POISON)
                .build()
                .deadLetterTopic())
        .contains("orders.dlt");
    for (String bad : new String[] {"", "has space", "x/y", ".", "..", "a".repeat(250)}) {
      assertThatThrownBy(() -> builder().deadLetterTopic(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("not a Kafka topic name")
          .hasMessageContaining("orders.dlt");
    }
    assertThat(
            builder()
                .deadLetterTopic("a".repeat(249))
                .deadLetterWhen(POISON)
                .build()
                .deadLetterTopic())
        .hasSize(1);
    assertThatThrownBy(() -> builder().deadLetterTopic("orders"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the topic the records come from");
  }

  @Test
  void deadLetterProducerSettingsTheGuaranteeRestsOnAreRefused() {
    for (String key :
        new String[] {
          "acks", "enable.idempotence", "bootstrap.servers", "transactional.id", "value.serializer"
        }) {
      assertThatThrownBy(() -> builder().deadLetterTopic("d").deadLetterProducerProperty(key, "x"))
          .as(key)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("belongs to the runner");
    }
    assertThat(
            builder()
                .deadLetterTopic("d")
                .deadLetterWhen(POISON)
                .deadLetterProducerProperty("security.protocol", "SSL")
                .build()
                .deadLetterProducerProperties())
        .containsEntry("security.protocol", "SSL");
    assertThatThrownBy(
            () -> builder().deadLetterProducerProperty("security.protocol", "SSL").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("without deadLetterTopic");
  }

  @Test
  void theDeadLetterTopicNeedsAPredicateAndThePredicateTheTopic() {
    assertThatThrownBy(() -> builder().deadLetterTopic("d").build())
        .as("nolock never guesses which failures are the record's")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("deadLetterTopic(\"d\") was set without deadLetterWhen")
        .hasMessageContaining("Causes.of(e)");
    assertThat(
            builder()
                .deadLetterTopic("d")
                .deadLetterWhen(e -> e instanceof IllegalArgumentException)
                .build()
                .deadLetterWhen()
                .test(new IllegalArgumentException()))
        .isTrue();
    assertThatThrownBy(() -> builder().deadLetterWhen(e -> true).build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("deadLetterWhen(...) was set without deadLetterTopic");
    assertThatThrownBy(() -> builder().deadLetterWhen(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("A null deadLetterWhen");
  }

  @Test
  void deadLetterWaitsLongerThanThePollIntervalAreRefused() {
    for (String key : new String[] {"max.block.ms", "delivery.timeout.ms"}) {
      for (Object tooLong : new Object[] {60_001, "60001", 60_001L}) {
        assertThatThrownBy(
                () ->
                    builder()
                        .maxPollInterval(Duration.ofSeconds(60))
                        .deadLetterTopic("d")
                        .deadLetterWhen(POISON)
                        .deadLetterProducerProperty(key, tooLong)
                        .build())
            .as(key + "=" + tooLong)
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining(key)
            .hasMessageContaining("maxPollInterval");
      }
      assertThat(
              builder()
                  .maxPollInterval(Duration.ofSeconds(60))
                  .deadLetterTopic("d")
                  .deadLetterWhen(POISON)
                  .deadLetterProducerProperty(key, 60_000)
                  .build()
                  .deadLetterProducerProperties())
          .containsEntry(key, 60_000);
    }
  }

  @Test
  void maxConsecutiveDeadLettersIsAtLeastOne() {
    assertThatThrownBy(() -> builder().maxConsecutiveDeadLetters(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least 1");
    assertThat(builder().build().maxConsecutiveDeadLetters())
        .isEqualTo(OwnershipConfig.DEFAULT_MAX_CONSECUTIVE_DEAD_LETTERS);
  }

  /**
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (plain values in the others), throws an IllegalArgumentException that says null, never a
   * NullPointerException.
   */
  static Stream<Arguments> nullArguments() {
    NullArguments.Values values = NullArguments.plainValues();
    return Stream.concat(
        NullArguments.of(OwnershipConfigTest::builder, values),
        NullArguments.ofFactory(OwnershipConfig.class, "custom", values));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("nullArguments")
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer(NullArguments.Call call) {
    call.assertRefusedAsIllegalArgument();
  }
}
