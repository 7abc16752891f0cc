package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.NullArguments;
import java.time.Duration;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class ExactlyOnceConfigTest {

  /** A handler's validation error: the record itself is poison. */
  private static final java.util.function.Predicate<Throwable> POISON =
      e -> e instanceof IllegalArgumentException;

  private static ExactlyOnceConfig.Builder builder() {
    return ExactlyOnceConfig.custom("127.0.0.1:9092", "payments", "payment-enricher", "enricher-1");
  }

  @Test
  void theDeadLetterTopicIsOptInAndNotTheInputTopic() {
    assertThat(builder().build().deadLetterTopic()).isEmpty();
    assertThat(
            builder()
                .deadLetterTopic("payments.dlt")
                .deadLetterWhen(POISON)
                .build()
                .deadLetterTopic())
        .containsExactly("payments.dlt");
    assertThatThrownBy(() -> builder().deadLetterTopic("payments"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("the topic the records come from");
    assertThatThrownBy(() -> builder().deadLetterTopic("no spaces"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a Kafka topic name");
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
  void defaultsAreTheDocumentedOnes() {
    ExactlyOnceConfig config = builder().build();
    assertThat(config.transactionalId()).isEqualTo("enricher-1");
    assertThat(config.pollTimeout()).isEqualTo(Duration.ofMillis(500));
    assertThat(config.maxPollRecords()).isEqualTo(100);
    assertThat(config.sessionTimeout()).isEqualTo(Duration.ofSeconds(10));
    assertThat(config.maxPollInterval()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.transactionTimeout()).isEqualTo(Duration.ofSeconds(60));
    assertThat(config.commitRetryTimeout()).isEqualTo(Duration.ofMinutes(5));
    assertThat(config.closeTimeout()).isEqualTo(Duration.ofSeconds(30));
  }

  @Test
  void settingsExactlyOnceDependsOnAreRefused() {
    assertThatThrownBy(() -> builder().consumerProperty("isolation.level", "read_uncommitted"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the pipeline");
    assertThatThrownBy(() -> builder().producerProperty("enable.idempotence", false))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to the pipeline");
    assertThatThrownBy(() -> builder().producerProperty("transactional.id", "other"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(builder().producerProperty("linger.ms", 10).build().producerProperties())
        .containsEntry("linger.ms", 10);
  }

  @Test
  void aBlankTransactionalIdIsRefused() {
    assertThatThrownBy(() -> ExactlyOnceConfig.custom("h:1", "payments", "g", " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("transactional.id");
  }

  @Test
  void aTransactionTimeoutOutOfRangeIsRefused() {
    assertThatThrownBy(() -> builder().transactionTimeout(Duration.ofMinutes(20)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("transactionTimeout");
  }

  @Test
  void aCommitRetryTimeoutOutOfRangeIsRefused() {
    assertThatThrownBy(() -> builder().commitRetryTimeout(Duration.ofMillis(500)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("commitRetryTimeout");
    assertThat(builder().commitRetryTimeout(Duration.ofSeconds(90)).build().commitRetryTimeout())
        .isEqualTo(Duration.ofSeconds(90));
  }

  /**
   * Every public builder method, and the factory, given null in any one of its object parameters
   * (plain values in the others), throws an IllegalArgumentException that says null, never a
   * NullPointerException.
   */
  static Stream<Arguments> nullArguments() {
    NullArguments.Values values = NullArguments.plainValues();
    return Stream.concat(
        NullArguments.of(ExactlyOnceConfigTest::builder, values),
        NullArguments.ofFactory(ExactlyOnceConfig.class, "custom", values));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("nullArguments")
  void nullInAnyBuilderParameterIsAnIllegalArgumentNotANullPointer(NullArguments.Call call) {
    call.assertRefusedAsIllegalArgument();
  }
}
