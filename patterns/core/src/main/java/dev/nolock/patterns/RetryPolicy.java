package dev.nolock.patterns;

import io.vavr.control.Either;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Supplier;
import java.util.random.RandomGenerator;

/**
 * How often and how long to retry an attempt that lost a race: bounded attempts, bounded elapsed
 * time, exponential backoff with full jitter.
 *
 * <p>Full jitter (a uniform delay in {@code [0, min(maxDelay, baseDelay * 2^(n-1))]} after the n-th
 * failure) spreads contenders that lost the same race apart, instead of waking them together to
 * collide again. Retrying is for <em>lost races</em> returned as values; an exception (a broken
 * backend) is not retried here and propagates.
 *
 * <p>Written by hand on purpose: it is one formula and one loop, and the libraries that do it
 * (resilience4j, Failsafe) signal a give-up with an exception, where nolock returns the last lost
 * race as a value.
 *
 * <p>Immutable and thread-safe; build with {@link #custom()} or take {@link #ofDefaults()}.
 */
public final class RetryPolicy {

  public static final int DEFAULT_MAX_ATTEMPTS = 10;
  public static final Duration DEFAULT_MAX_ELAPSED = Duration.ofSeconds(10);
  public static final Duration DEFAULT_BASE_DELAY = Duration.ofMillis(5);
  public static final Duration DEFAULT_MAX_DELAY = Duration.ofSeconds(1);

  private final int maxAttempts;
  private final Duration maxElapsed;
  private final Duration baseDelay;
  private final Duration maxDelay;

  private RetryPolicy(Builder builder) {
    this.maxAttempts = builder.maxAttempts;
    this.maxElapsed = builder.maxElapsed;
    this.baseDelay = builder.baseDelay;
    this.maxDelay = builder.maxDelay;
    if (maxDelay.compareTo(baseDelay) < 0) {
      throw new IllegalArgumentException(
          "maxDelay ("
              + maxDelay
              + ") is below baseDelay ("
              + baseDelay
              + "): the backoff could"
              + " never grow. Raise maxDelay or lower baseDelay.");
    }
  }

  /** {@value #DEFAULT_MAX_ATTEMPTS} attempts within 10 s, backoff from 5 ms up to 1 s. */
  public static RetryPolicy ofDefaults() {
    return custom().build();
  }

  /** One attempt, no retry. */
  public static RetryPolicy noRetry() {
    return custom().maxAttempts(1).build();
  }

  public static Builder custom() {
    return new Builder();
  }

  public int maxAttempts() {
    return maxAttempts;
  }

  public Duration maxElapsed() {
    return maxElapsed;
  }

  public Duration baseDelay() {
    return baseDelay;
  }

  public Duration maxDelay() {
    return maxDelay;
  }

  /**
   * The delay before the next attempt after {@code failedAttempts} failures: uniform in {@code [0,
   * min(maxDelay, baseDelay * 2^(failedAttempts-1))]}.
   */
  public Duration backoff(int failedAttempts, RandomGenerator random) {
    if (failedAttempts < 1) {
      throw new IllegalArgumentException(
          "failedAttempts counts failures so far and starts at 1, got " + failedAttempts);
    }
    long cap = ceilingNanos(failedAttempts);
    return Duration.ofNanos(random.nextLong(cap + 1));
  }

  /** The upper bound of {@link #backoff} after {@code failedAttempts} failures. */
  long ceilingNanos(int failedAttempts) {
    long base = baseDelay.toNanos();
    long max = maxDelay.toNanos();
    if (base == 0) {
      return 0;
    }
    int shift = failedAttempts - 1;
    if (shift >= Long.numberOfLeadingZeros(base) - 1) {
      return max; // one more doubling would overflow; the ceiling is long past maxDelay anyway
    }
    return Math.min(max, base << shift);
  }

  /**
   * Runs {@code attempt} until it returns a right value or the policy gives up, sleeping a backoff
   * on {@code clock} between attempts.
   *
   * <ol>
   *   <li>Run the attempt; a right value is returned at once.
   *   <li>After {@code maxAttempts} left values, give up.
   *   <li>Draw the backoff; if waiting it would pass {@code maxElapsed} since the first attempt,
   *       give up; otherwise wait and go to 1.
   * </ol>
   *
   * Giving up returns the last left value, so the caller sees the last lost race (for example the
   * current version that beat it), not an exception. An interrupt during the wait also gives up,
   * with the thread's interrupt flag set again.
   */
  public <L, R> Either<L, R> run(LeaseClock clock, Supplier<Either<L, R>> attempt) {
    present(clock, "clock");
    present(attempt, "attempt");
    long start = clock.nanoTime();
    RandomGenerator random = ThreadLocalRandom.current();
    for (int failures = 1; ; failures++) {
      Either<L, R> result = Objects.requireNonNull(attempt.get(), "attempt returned null");
      if (result.isRight() || failures >= maxAttempts) {
        return result;
      }
      Duration delay = backoff(failures, random);
      Duration elapsed = Duration.ofNanos(clock.nanoTime() - start);
      if (elapsed.plus(delay).compareTo(maxElapsed) > 0) {
        return result;
      }
      try {
        clock.sleep(delay);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return result;
      }
    }
  }

  @Override
  public String toString() {
    return "RetryPolicy[maxAttempts="
        + maxAttempts
        + ", maxElapsed="
        + maxElapsed
        + ", baseDelay="
        + baseDelay
        + ", maxDelay="
        + maxDelay
        + "]";
  }

  /** Builds a {@link RetryPolicy}; each setter validates at once. */
  public static final class Builder {
    private int maxAttempts = DEFAULT_MAX_ATTEMPTS;
    private Duration maxElapsed = DEFAULT_MAX_ELAPSED;
    private Duration baseDelay = DEFAULT_BASE_DELAY;
    private Duration maxDelay = DEFAULT_MAX_DELAY;

    private Builder() {}

    /** Attempts in all, including the first; at least 1. */
    public Builder maxAttempts(int maxAttempts) {
      if (maxAttempts < 1) {
        throw new IllegalArgumentException(
            "maxAttempts counts the first attempt too and must be at least 1, got " + maxAttempts);
      }
      this.maxAttempts = maxAttempts;
      return this;
    }

    /** No new attempt starts if its backoff would end later than this after the first one. */
    public Builder maxElapsed(Duration maxElapsed) {
      positive("maxElapsed", maxElapsed);
      if (maxElapsed.compareTo(Duration.ofDays(1)) > 0) {
        throw new IllegalArgumentException(
            "maxElapsed of " + maxElapsed + " is over a day: bound retries by minutes, not days.");
      }
      this.maxElapsed = maxElapsed;
      return this;
    }

    /** The backoff ceiling after the first failure; it doubles with each further one. */
    public Builder baseDelay(Duration baseDelay) {
      present(baseDelay, "baseDelay");
      if (baseDelay.isNegative() || baseDelay.compareTo(Duration.ofHours(1)) > 0) {
        throw new IllegalArgumentException(
            "baseDelay must be between zero and one hour, got " + baseDelay);
      }
      this.baseDelay = baseDelay;
      return this;
    }

    /** The largest backoff ceiling. */
    public Builder maxDelay(Duration maxDelay) {
      positive("maxDelay", maxDelay);
      if (maxDelay.compareTo(Duration.ofHours(1)) > 0) {
        throw new IllegalArgumentException(
            "maxDelay of "
                + maxDelay
                + " is over an hour: a retry that waits that long is a"
                + " schedule, not a backoff. Use at most Duration.ofHours(1).");
      }
      this.maxDelay = maxDelay;
      return this;
    }

    public RetryPolicy build() {
      return new RetryPolicy(this);
    }

    private static Duration positive(String what, Duration value) {
      present(value, what);
      if (value.isNegative() || value.isZero()) {
        throw new IllegalArgumentException(what + " must be positive, got " + value);
      }
      return value;
    }
  }

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming the setting: a configuration error
   * is the caller's to fix, never a {@link NullPointerException}.
   */
  private static <V> V present(V value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass a value, or leave the setting out to keep its default.");
    }
    return value;
  }
}
