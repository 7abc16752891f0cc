package dev.nolock.dynamodb;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.Function;
import java.util.function.IntFunction;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.awscore.retry.AwsRetryStrategy;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.exception.SdkServiceException;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.DynamoDbException;

/**
 * Sends one conditional write with the AWS SDK's own retries off, and retries it here, where it is
 * known which attempts were ambiguous.
 *
 * <p>Why: when a connection drops after DynamoDB applied a write, the SDK resends the request; the
 * resend's condition is evaluated against what the first send wrote and fails, and the SDK reports
 * a refusal ({@link ConditionalCheckFailedException}) for a write that landed. Nothing in the
 * refusal says that an earlier attempt was ambiguous. Here every attempt is its own request, the
 * caller writes a fresh record version per attempt (so it can recognise its own write in the item
 * later), and the outcome says whether a refusal followed an ambiguous attempt; the caller then
 * reads the item and reports its own success, or "unknown", but never a refusal it cannot prove.
 *
 * <p>Algorithm of {@link #send}:
 *
 * <ol>
 *   <li>Send attempt {@code n} (from 1) with {@link #ONE_ATTEMPT}: the SDK's retry strategy is
 *       replaced for this request only, so the caller's client keeps its own settings for
 *       everything else.
 *   <li>Applied: return {@link Applied}. Refused by the condition: return {@link Refused}, saying
 *       whether an earlier attempt was ambiguous.
 *   <li>Failed without an answer (I/O error, time-out) or with a server error (5xx): the write may
 *       have been applied; remember that, or, with {@link Resend#ONLY_WHEN_NOT_APPLIED}, return
 *       {@link Unanswered} without sending it again. Throttled: it was not applied. Any other error
 *       (a missing table, a validation error, no permission) is thrown at once, translated:
 *       retrying cannot help.
 *   <li>After {@value #MAX_ATTEMPTS} attempts, throw the last failure translated (a {@link
 *       dev.nolock.patterns.BackendUnavailableException}: whether the write took effect is
 *       unknown). Otherwise wait a backoff with full jitter (from 25 ms, at most 1 s) and go to 1.
 * </ol>
 *
 * {@value #MAX_ATTEMPTS} attempts is the SDK's own default in its standard retry mode. Written by
 * hand because the SDK's retry cannot tell its caller that an attempt was ambiguous, which is the
 * one thing this needs.
 *
 * <p>A building block for DynamoDB components (this module's store and fence, and the fenced lock's
 * DynamoDB backend), public so that they share one resend policy. Stateless and thread-safe.
 */
public final class ConditionalWrites {

  /** Attempts of one conditional write, the first included. */
  public static final int MAX_ATTEMPTS = 3;

  /**
   * Turns the SDK's retries off for one request, through a request-level plugin; set it on every
   * conditional write sent through {@link #send}.
   */
  public static final AwsRequestOverrideConfiguration ONE_ATTEMPT =
      AwsRequestOverrideConfiguration.builder()
          .addPlugin(
              client ->
                  client.overrideConfiguration(
                      override -> override.retryStrategy(AwsRetryStrategy.doNotRetry())))
          .build();

  private static final RetryPolicy BACKOFF =
      RetryPolicy.custom()
          .maxAttempts(MAX_ATTEMPTS)
          .baseDelay(Duration.ofMillis(25))
          .maxDelay(Duration.ofSeconds(1))
          .build();

  private ConditionalWrites() {}

  /** When {@link #send} sends an attempt again. */
  public enum Resend {
    /** After throttling, and after a failure that may have been applied. */
    ALWAYS,
    /**
     * After throttling only. For a write whose condition a later write of the item can make true
     * again, such as an insert's {@code attribute_not_exists}: after its first send landed and
     * another writer deleted the item, a resend would land a second time and undo that delete.
     */
    ONLY_WHEN_NOT_APPLIED
  }

  /** What one conditional write came to. */
  public sealed interface Outcome<R> permits Applied, Refused, Unanswered {}

  /**
   * DynamoDB applied attempt {@code attempt} (from 1) and answered {@code response}. Where each
   * attempt's condition fails on what an earlier attempt wrote (every write of the store and the
   * lock backend), no earlier attempt was applied; the fence's writes may pass twice, with the same
   * content.
   */
  public record Applied<R>(R response, int attempt) implements Outcome<R> {}

  /**
   * DynamoDB refused the last attempt because its condition failed.
   *
   * @param afterAmbiguousAttempt whether an earlier attempt may have been applied: then the refusal
   *     may be caused by this call's own earlier write, and only the item can say which
   */
  public record Refused<R>(boolean afterAmbiguousAttempt) implements Outcome<R> {}

  /**
   * The last attempt got no answer or a server error, and was not sent again ({@link
   * Resend#ONLY_WHEN_NOT_APPLIED}): it may have been applied, and only the item can say.
   */
  public record Unanswered<R>() implements Outcome<R> {}

  /**
   * Sends {@code attempt(n)} until it is applied or refused, at most {@value #MAX_ATTEMPTS} times.
   *
   * @param clock what the backoff waits on
   * @param attempt sends attempt {@code n} (from 1) with {@link #ONE_ATTEMPT} and returns the
   *     response; it writes a record version of its own per attempt where the caller must recognise
   *     its write later
   * @param translate the exception to throw for a failure that is not retried, or for the last one
   * @throws RuntimeException what {@code translate} returns, when no attempt was applied or refused
   */
  public static <R> Outcome<R> send(
      LeaseClock clock,
      IntFunction<R> attempt,
      Function<SdkException, RuntimeException> translate) {
    return send(clock, attempt, translate, Resend.ALWAYS);
  }

  /**
   * Like {@link #send(LeaseClock, IntFunction, Function)}, resending as {@code resend} says.
   *
   * @return {@link Applied}, {@link Refused}, or with {@link Resend#ONLY_WHEN_NOT_APPLIED} also
   *     {@link Unanswered}
   */
  public static <R> Outcome<R> send(
      LeaseClock clock,
      IntFunction<R> attempt,
      Function<SdkException, RuntimeException> translate,
      Resend resend) {
    Objects.requireNonNull(clock, "clock");
    Objects.requireNonNull(resend, "resend");
    boolean ambiguous = false;
    for (int n = 1; ; n++) {
      try {
        return new Applied<>(attempt.apply(n), n);
      } catch (ConditionalCheckFailedException refused) {
        return new Refused<>(ambiguous);
      } catch (SdkException e) {
        if (isThrottled(e)) {
          // Refused before it was applied: this attempt leaves no doubt behind.
        } else if (isAmbiguous(e)) {
          if (resend == Resend.ONLY_WHEN_NOT_APPLIED) {
            return new Unanswered<>();
          }
          ambiguous = true;
        } else {
          throw translate.apply(e);
        }
        if (n >= MAX_ATTEMPTS || Thread.currentThread().isInterrupted()) {
          throw translate.apply(e);
        }
        try {
          clock.sleep(BACKOFF.backoff(n, ThreadLocalRandom.current()));
        } catch (InterruptedException interrupted) {
          Thread.currentThread().interrupt();
          throw translate.apply(e);
        }
      }
    }
  }

  /** Throttled: DynamoDB answered that it did not apply the request. */
  private static boolean isThrottled(SdkException e) {
    return e instanceof SdkServiceException service
        && (service.isThrottlingException()
            || e instanceof DynamoDbException dynamo
                && dynamo.awsErrorDetails() != null
                && "TransactionConflictException".equals(dynamo.awsErrorDetails().errorCode()));
  }

  /**
   * No answer (the client failed: I/O, a time-out) or a server error: DynamoDB may have applied it.
   */
  private static boolean isAmbiguous(SdkException e) {
    return !(e instanceof SdkServiceException service) || service.statusCode() >= 500;
  }
}
