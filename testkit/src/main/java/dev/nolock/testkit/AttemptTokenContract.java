package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;

/**
 * The contract of every design that hands out <em>attempts</em> of an item with a rising attempt
 * token and lets only the current attempt finish it: a queue's job, an idempotency key, a scheduled
 * run, a partition's owner epoch. A module's test extends this class with its own attempt type and
 * a ledger of effects that has no unique key on what it counts (a unique key would hide the very
 * duplicate the suite looks for).
 *
 * <p>What it checks, against the real server:
 *
 * <ol>
 *   <li>a stale attempt cannot finish: after the item was taken over, the old attempt's finish is
 *       refused and leaves no effect, whatever order the two finish in;
 *   <li>a lost answer followed by a retry ends as one success: the finish is sent with its answer
 *       (or its request) lost, the caller hears "finished" or "unknown", retries after unknown, and
 *       the ledger holds exactly one effect; the retry may be told "already finished", never
 *       "stale" for its own success;
 *   <li>two attempts of one item in one process stay apart: each is answered as itself.
 * </ol>
 *
 * @param <A> the design's attempt (a claimed job, a key's attempt, a claimed run, an epoch)
 */
public abstract class AttemptTokenContract<A> {

  /** What finishing an attempt answered. */
  public enum Finish {
    /** This call committed the attempt's effect. */
    FINISHED,
    /**
     * This attempt had already finished (an earlier send of the same finish committed it); this
     * call changed nothing. For a finish in the caller's transaction the caller must roll back.
     */
    ALREADY_FINISHED,
    /** A newer attempt took the item over: nothing was written. */
    STALE
  }

  /** A fresh item, ready to be claimed; returns its key. */
  protected abstract String newItem();

  /** Claims {@code item} in this process: a new attempt, or empty while another attempt is live. */
  protected abstract Option<A> claim(String item);

  /**
   * Lets every live attempt of {@code item} lapse (its lease runs out, its key is taken over, its
   * run reaped, its partition reassigned), so that the next {@link #claim} makes a newer attempt.
   * The lapsed attempts' process still believes in them, as a paused one would.
   */
  protected abstract void lapse(String item);

  /** The attempt's token: newer attempts of one item have higher tokens. */
  protected abstract long token(A attempt);

  /** Finishes {@code attempt}: commits its effect (one ledger row) if it is still current. */
  protected abstract Finish finish(A attempt);

  /**
   * The same finish with {@code kind} injected into its commit; returns what the caller heard.
   *
   * @throws BackendUnavailableException when the caller was told "unknown"
   * @throws AssertionError unless the injected fault fired
   */
  protected abstract Finish finishWithFault(A attempt, FaultKind kind);

  /** How many effects of {@code item} the ledger holds. */
  protected abstract int effects(String item);

  @Test
  void aStaleAttemptCannotFinishBeforeTheNewOne() {
    String item = newItem();
    A first = claimed(item);
    lapse(item);
    A second = claimed(item);
    assertThat(token(second)).as("the takeover's token is higher").isGreaterThan(token(first));

    assertThat(finish(first)).as("the stale attempt's finish").isEqualTo(Finish.STALE);
    assertThat(effects(item)).as("the stale finish was refused and wrote nothing").isZero();
    assertThat(finish(second)).isEqualTo(Finish.FINISHED);
    assertThat(effects(item)).isEqualTo(1);
  }

  @Test
  void aStaleAttemptCannotFinishAfterTheNewOne() {
    String item = newItem();
    A first = claimed(item);
    lapse(item);
    A second = claimed(item);

    assertThat(finish(second)).isEqualTo(Finish.FINISHED);
    assertThat(finish(first)).as("the stale attempt's finish").isEqualTo(Finish.STALE);
    assertThat(effects(item)).as("one effect: the new attempt's").isEqualTo(1);
  }

  @Test
  void aFinishWhoseAnswerIsLostAndItsRetryEndAsOneSuccess() {
    finishThenRetry(FaultKind.ANSWER_LOST);
  }

  @Test
  void aFinishLostOnTheWayAndItsRetryEndAsOneSuccess() {
    finishThenRetry(FaultKind.REQUEST_LOST);
  }

  @Test
  void aRetriedFinishOfAStaleAttemptIsStillStale() {
    String item = newItem();
    A first = claimed(item);
    lapse(item);
    A second = claimed(item);

    Either<BackendUnavailableException, Finish> heard =
        outcome(() -> finishWithFault(first, FaultKind.ANSWER_LOST));

    Finish staleOrUnknown = heard.fold(unknown -> Finish.STALE, finish -> finish);
    assertThat(staleOrUnknown)
        .as("a stale attempt's finish, answer lost: stale or unknown")
        .isEqualTo(Finish.STALE);
    assertThat(finish(first)).as("its retry").isEqualTo(Finish.STALE);
    assertThat(finish(second)).isEqualTo(Finish.FINISHED);
    assertThat(effects(item)).isEqualTo(1);
  }

  @Test
  void twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves() {
    String item = newItem();
    A first = claimed(item);
    lapse(item);
    A second = claimed(item);

    assertThat(finish(first)).as("the first attempt, stale").isEqualTo(Finish.STALE);
    assertThat(finish(second)).as("the second, current").isEqualTo(Finish.FINISHED);
    assertThat(finish(first)).as("the first again, still stale").isEqualTo(Finish.STALE);
    assertThat(finish(second))
        .as("the second again: its own success is no conflict")
        .isIn(Finish.ALREADY_FINISHED, Finish.FINISHED);
    assertThat(effects(item)).isEqualTo(1);
  }

  private void finishThenRetry(FaultKind kind) {
    String item = newItem();
    A attempt = claimed(item);

    Either<BackendUnavailableException, Finish> heard =
        outcome(() -> finishWithFault(attempt, kind));

    Finish finishedOrUnknown = heard.fold(unknown -> Finish.FINISHED, finish -> finish);
    assertThat(finishedOrUnknown)
        .as("%s: the only attempt's finish is finished or unknown, never %s", kind, heard)
        .isEqualTo(Finish.FINISHED);
    if (heard.isLeft()) {
      assertThat(finish(attempt))
          .as("%s: the retry after unknown: finished now, or its own earlier success", kind)
          .isIn(Finish.FINISHED, Finish.ALREADY_FINISHED);
    }
    assertThat(effects(item)).as("%s: exactly one effect", kind).isEqualTo(1);
  }

  private A claimed(String item) {
    return claim(item)
        .getOrElseThrow(() -> new AssertionError("claiming " + item + " was refused"));
  }

  private static <T> Either<BackendUnavailableException, T> outcome(Supplier<T> call) {
    try {
      return Either.right(call.get());
    } catch (BackendUnavailableException unknown) {
      return Either.left(unknown);
    }
  }
}
