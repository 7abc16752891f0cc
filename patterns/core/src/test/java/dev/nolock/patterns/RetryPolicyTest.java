package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vavr.control.Either;
import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicInteger;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.Test;

class RetryPolicyTest {

  @Property
  void backoffStaysWithinTheExponentialCeilingAndNeverOverflows(
      @ForAll @IntRange(min = 1, max = 10_000) int failures,
      @ForAll @LongRange(min = 0, max = 3_600_000) long baseMillis,
      @ForAll @LongRange(min = 1, max = 3_600_000) long maxMillis,
      @ForAll long randomStart) {
    if (maxMillis < baseMillis) {
      return;
    }
    RetryPolicy policy =
        RetryPolicy.custom()
            .baseDelay(Duration.ofMillis(baseMillis))
            .maxDelay(Duration.ofMillis(maxMillis))
            .build();
    double exponential = baseMillis * Math.pow(2, Math.min(failures - 1, 1000));
    long ceilingMillis = (long) Math.min(maxMillis, exponential);

    Duration backoff = policy.backoff(failures, new SplittableRandom(randomStart));

    assertThat(backoff).isBetween(Duration.ZERO, Duration.ofMillis(ceilingMillis));
  }

  @Test
  void backoffIsJitteredNotFixed() {
    RetryPolicy policy = RetryPolicy.custom().baseDelay(Duration.ofMillis(100)).build();
    SplittableRandom random = new SplittableRandom(7);
    long distinct =
        java.util.stream.IntStream.range(0, 50)
            .mapToObj(i -> policy.backoff(3, random))
            .distinct()
            .count();
    assertThat(distinct).isGreaterThan(40);
  }

  @Test
  void aWinIsReturnedAtOnce() {
    AtomicInteger attempts = new AtomicInteger();
    Either<String, Integer> result =
        RetryPolicy.ofDefaults()
            .run(new ManualLeaseClock(), () -> Either.right(attempts.incrementAndGet()));
    assertThat(result.get()).isEqualTo(1);
    assertThat(attempts).hasValue(1);
  }

  @Test
  void givingUpAfterMaxAttemptsReturnsTheLastLostRace() {
    AtomicInteger attempts = new AtomicInteger();
    RetryPolicy policy = RetryPolicy.custom().maxAttempts(4).build();

    Either<String, Integer> result =
        policy.run(
            new ManualLeaseClock(), () -> Either.left("lost #" + attempts.incrementAndGet()));

    assertThat(attempts).hasValue(4);
    assertThat(result.getLeft()).isEqualTo("lost #4");
  }

  @Test
  void noAttemptStartsAfterMaxElapsed() {
    ManualLeaseClock clock = new ManualLeaseClock();
    AtomicInteger attempts = new AtomicInteger();
    RetryPolicy policy =
        RetryPolicy.custom()
            .maxAttempts(1_000)
            .baseDelay(Duration.ofMillis(50))
            .maxDelay(Duration.ofMillis(50))
            .maxElapsed(Duration.ofSeconds(1))
            .build();

    Either<String, Integer> result =
        policy.run(
            clock,
            () -> {
              attempts.incrementAndGet();
              clock.advance(Duration.ofMillis(10)); // each attempt takes 10 ms
              return Either.left("lost");
            });

    assertThat(result.isLeft()).isTrue();
    assertThat(attempts.get()).isBetween(2, 1_000);
    assertThat(Duration.ofNanos(clock.nanoTime())).isLessThanOrEqualTo(Duration.ofMillis(1_010));
  }

  @Test
  void aRetryThatSucceedsLaterReturnsTheWin() {
    AtomicInteger attempts = new AtomicInteger();
    Either<String, String> result =
        RetryPolicy.ofDefaults()
            .run(
                new ManualLeaseClock(),
                () -> attempts.incrementAndGet() < 3 ? Either.left("lost") : Either.right("won"));
    assertThat(result.get()).isEqualTo("won");
    assertThat(attempts).hasValue(3);
  }

  @Test
  void anExceptionIsABrokenBackendAndIsNotRetried() {
    AtomicInteger attempts = new AtomicInteger();
    assertThatThrownBy(
            () ->
                RetryPolicy.ofDefaults()
                    .run(
                        new ManualLeaseClock(),
                        () -> {
                          attempts.incrementAndGet();
                          throw new IllegalStateException("backend down");
                        }))
        .hasMessage("backend down");
    assertThat(attempts).hasValue(1);
  }

  @Test
  void badSettingsAreRefusedWithAFix() {
    assertThatThrownBy(() -> RetryPolicy.custom().maxAttempts(0))
        .hasMessageContaining("at least 1");
    assertThatThrownBy(() -> RetryPolicy.custom().maxElapsed(Duration.ZERO))
        .hasMessageContaining("must be positive");
    assertThatThrownBy(
            () ->
                RetryPolicy.custom()
                    .baseDelay(Duration.ofSeconds(2))
                    .maxDelay(Duration.ofSeconds(1))
                    .build())
        .hasMessageContaining("Raise maxDelay");
  }
}
