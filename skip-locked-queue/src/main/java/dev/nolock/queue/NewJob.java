package dev.nolock.queue;

import dev.nolock.patterns.Names;
import dev.nolock.queue.internal.Arguments;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.Instant;

/**
 * A job to enqueue: its payload and, optionally, when it may run, a unique key and its own attempt
 * limit. Immutable; each {@code with}-style method validates at once and returns a copy.
 *
 * <pre>{@code
 * NewJob.of(invoiceId)                       // runs as soon as a worker is free
 *     .delay(Duration.ofMinutes(5))          // not before the database's clock + 5 min
 *     .uniqueKey("invoice-42")               // a second enqueue while it is pending is a no-op
 *     .maxAttempts(3);                       // instead of the queue's default
 * }</pre>
 *
 * @param <T> the payload type, encoded by the queue's {@link PayloadCodec}
 */
public final class NewJob<T> {

  /** Longest unique key accepted. */
  public static final int MAX_UNIQUE_KEY_LENGTH = 255;

  /** Longest delay accepted: a job due in more than a year is a schedule, not a queue entry. */
  public static final Duration MAX_DELAY = Duration.ofDays(366);

  /** Highest per-job attempt limit accepted. */
  public static final int MAX_ATTEMPTS_LIMIT = 1_000;

  private final T payload;
  private final Instant runAt;
  private final Duration delay;
  private final String uniqueKey;
  private final Integer maxAttempts;

  private NewJob(T payload, Instant runAt, Duration delay, String uniqueKey, Integer maxAttempts) {
    this.payload = payload;
    this.runAt = runAt;
    this.delay = delay;
    this.uniqueKey = uniqueKey;
    this.maxAttempts = maxAttempts;
  }

  /** A job carrying {@code payload} that may run at once. */
  public static <T> NewJob<T> of(T payload) {
    return new NewJob<>(
        Arguments.required(payload, "The payload", "the job's data, which the codec encodes"),
        null,
        null,
        null,
        null);
  }

  /**
   * Not before {@code at}, compared with the database's clock ({@code run_at <=
   * clock_timestamp()}). Prefer {@link #delay} for "in five minutes": it is added on the database's
   * clock, so this process's clock error does not enter.
   */
  public NewJob<T> runAt(Instant at) {
    Arguments.required(at, "runAt", "an Instant, or use delay(Duration)");
    if (delay != null) {
      throw new IllegalArgumentException(
          "This job already has a delay (" + delay + "); set either runAt or delay, not both.");
    }
    return new NewJob<>(payload, at, null, uniqueKey, maxAttempts);
  }

  /** Not before the database's clock at insert ({@code clock_timestamp()}) plus {@code delay}. */
  public NewJob<T> delay(Duration delay) {
    Arguments.required(
        delay, "The delay", "e.g. Duration.ofMinutes(5), or leave it out to run at once");
    if (runAt != null) {
      throw new IllegalArgumentException(
          "This job already has runAt (" + runAt + "); set either runAt or delay, not both.");
    }
    if (delay.isNegative() || delay.compareTo(MAX_DELAY) > 0) {
      throw new IllegalArgumentException(
          "The delay must be between zero and "
              + MAX_DELAY
              + ", got "
              + delay
              + ": use runAt(Instant) for a fixed time, or a scheduler for jobs further out.");
    }
    return new NewJob<>(payload, null, delay, uniqueKey, maxAttempts);
  }

  /**
   * While a job with this key is ready or running in the same queue, enqueueing another one is a
   * no-op reported as {@link EnqueueResult.Duplicate}. Once the job is done or dead the key is free
   * again (see the README, "Unique keys").
   */
  public NewJob<T> uniqueKey(String key) {
    Names.requireName("unique key", key, MAX_UNIQUE_KEY_LENGTH);
    return new NewJob<>(payload, runAt, delay, key, maxAttempts);
  }

  /** Attempts in all, including the first, before the job is dead-lettered; 1 to 1000. */
  public NewJob<T> maxAttempts(int attempts) {
    if (attempts < 1 || attempts > MAX_ATTEMPTS_LIMIT) {
      throw new IllegalArgumentException(
          "maxAttempts counts the first attempt too and must be 1 to "
              + MAX_ATTEMPTS_LIMIT
              + ", got "
              + attempts);
    }
    return new NewJob<>(payload, runAt, delay, uniqueKey, attempts);
  }

  public T payload() {
    return payload;
  }

  /** The fixed time set with {@link #runAt}, if any. */
  public Option<Instant> runAt() {
    return Option.of(runAt);
  }

  /** The delay set with {@link #delay}; zero when none was set. */
  public Duration delay() {
    return delay == null ? Duration.ZERO : delay;
  }

  public Option<String> uniqueKey() {
    return Option.of(uniqueKey);
  }

  /** The job's own attempt limit; empty means the queue's {@link QueueConfig#maxAttempts()}. */
  public Option<Integer> maxAttempts() {
    return Option.of(maxAttempts);
  }

  @Override
  public String toString() {
    return "NewJob["
        + (uniqueKey == null ? "" : "uniqueKey=" + uniqueKey + ", ")
        + (runAt != null ? "runAt=" + runAt : "delay=" + delay())
        + "]";
  }
}
