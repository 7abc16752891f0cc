package dev.nolock.idempotency.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.RetryPolicy;
import io.vavr.control.Either;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The permits of {@link WaitBound}, on one thread: a call waits inside another's attempt, so the
 * first holds its permit while the second asks for one.
 */
class WaitBoundTest {

  private static final RetryPolicy WAIT = RetryPolicy.custom().maxAttempts(3).build();

  private final ManualLeaseClock clock = new ManualLeaseClock();
  private final WaitBound bound = new WaitBound(1);
  private final AtomicInteger refusals = new AtomicInteger();

  @Test
  void aCallThatFindsNoPermitAnswersItsFirstInProgressAtOnce() {
    AtomicInteger innerAttempts = new AtomicInteger();
    AtomicInteger outerAttempts = new AtomicInteger();

    Either<String, String> outer =
        run(
            WAIT,
            () -> {
              if (outerAttempts.incrementAndGet() == 2) { // waiting, so holding the permit
                Either<String, String> inner =
                    run(
                        WAIT,
                        () -> {
                          innerAttempts.incrementAndGet();
                          return Either.left("in progress");
                        });
                assertThat(inner).isEqualTo(Either.left("in progress"));
                return Either.right("replayed");
              }
              return Either.left("in progress");
            });

    assertThat(outer).isEqualTo(Either.right("replayed"));
    assertThat(innerAttempts).as("refused after one attempt, never waited").hasValue(1);
    assertThat(refusals).hasValue(1);
  }

  @Test
  void thePermitIsGivenBackWhenAnAttemptThrows() {
    AtomicInteger attempts = new AtomicInteger();
    assertThatThrownBy(
            () ->
                run(
                    WAIT,
                    () -> {
                      if (attempts.incrementAndGet() == 2) {
                        throw new IllegalStateException("the database went away");
                      }
                      return Either.left("in progress");
                    }))
        .hasMessage("the database went away");

    assertThat(run(WAIT, () -> Either.left("in progress"))).isEqualTo(Either.left("in progress"));
    assertThat(refusals).as("the second call waited: the permit was back").hasValue(0);
  }

  @Test
  void thePermitIsGivenBackWhenThePolicyGivesUp() {
    assertThat(run(WAIT, () -> Either.left("in progress"))).isEqualTo(Either.left("in progress"));
    assertThat(run(WAIT, () -> Either.left("in progress"))).isEqualTo(Either.left("in progress"));

    assertThat(refusals).hasValue(0);
  }

  @Test
  void aCallThatDoesNotWaitTakesNoPermit() {
    Either<String, String> outer =
        run(
            WAIT,
            new Supplier<>() {
              private int attempts;

              @Override
              public Either<String, String> get() {
                if (++attempts == 2) {
                  assertThat(run(RetryPolicy.noRetry(), () -> Either.left("in progress")))
                      .isEqualTo(Either.left("in progress"));
                  return Either.right("done");
                }
                return Either.left("in progress");
              }
            });

    assertThat(outer).isEqualTo(Either.right("done"));
    assertThat(refusals).as("a call without waiting is never refused").hasValue(0);
  }

  private Either<String, String> run(RetryPolicy policy, Supplier<Either<String, String>> attempt) {
    return bound.bounding(policy, refusals::incrementAndGet).run(clock, attempt);
  }
}
