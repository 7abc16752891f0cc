package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import io.vavr.control.Option;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/** The attempt-token suite can fail: a design without the stale check, and one without replay. */
class AttemptTokenContractCatchesABrokenDesignTest {

  enum Flaw {
    NONE,
    NO_STALE_CHECK,
    NO_REPLAY_CHECK
  }

  record Attempt(String item, long token) {}

  /** Items in memory: a current token, a finished flag and a ledger count per item. */
  abstract static class InMemoryDesign extends AttemptTokenContract<Attempt> {
    private static final class Item {
      long current;
      boolean live;
      boolean finished;
      final AtomicInteger effects = new AtomicInteger();
    }

    private final Map<String, Item> items = new ConcurrentHashMap<>();
    private final AtomicInteger ids = new AtomicInteger();

    abstract Flaw flaw();

    @Override
    protected String newItem() {
      String key = "item-" + ids.incrementAndGet();
      items.put(key, new Item());
      return key;
    }

    @Override
    protected synchronized Option<Attempt> claim(String key) {
      Item item = items.get(key);
      if (item.live) {
        return Option.none();
      }
      item.live = true;
      return Option.some(new Attempt(key, ++item.current));
    }

    @Override
    protected synchronized void lapse(String key) {
      items.get(key).live = false;
    }

    @Override
    protected long token(Attempt attempt) {
      return attempt.token();
    }

    @Override
    protected synchronized Finish finish(Attempt attempt) {
      Item item = items.get(attempt.item());
      if (attempt.token() != item.current && flaw() != Flaw.NO_STALE_CHECK) {
        return Finish.STALE;
      }
      if (item.finished && flaw() != Flaw.NO_REPLAY_CHECK) {
        return Finish.ALREADY_FINISHED;
      }
      item.finished = true;
      item.effects.incrementAndGet();
      return Finish.FINISHED;
    }

    @Override
    protected Finish finishWithFault(Attempt attempt, FaultKind kind) {
      if (kind == FaultKind.ANSWER_LOST) {
        finish(attempt);
      }
      throw new BackendUnavailableException("injected " + kind + ": outcome unknown", null);
    }

    @Override
    protected int effects(String key) {
      return items.get(key).effects.get();
    }
  }

  static class Sound extends InMemoryDesign {
    @Override
    Flaw flaw() {
      return Flaw.NONE;
    }
  }

  static class WithoutStaleCheck extends InMemoryDesign {
    @Override
    Flaw flaw() {
      return Flaw.NO_STALE_CHECK;
    }
  }

  static class WithoutReplayCheck extends InMemoryDesign {
    @Override
    Flaw flaw() {
      return Flaw.NO_REPLAY_CHECK;
    }
  }

  @Test
  void aSoundDesignPassesEveryCase() {
    assertThat(ContractRuns.failures(ContractRuns.run(Sound.class))).isEmpty();
  }

  @Test
  void withoutTheStaleCheckTheStaleFinishesAreCaught() {
    assertThat(ContractRuns.failures(ContractRuns.run(WithoutStaleCheck.class)).keySet())
        .contains(
            "aStaleAttemptCannotFinishBeforeTheNewOne()",
            "aStaleAttemptCannotFinishAfterTheNewOne()",
            "aRetriedFinishOfAStaleAttemptIsStillStale()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
  }

  @Test
  void withoutTheReplayCheckALostAnswerAndItsRetryCommitTwice() {
    Map<String, String> failures =
        ContractRuns.failures(ContractRuns.run(WithoutReplayCheck.class));

    assertThat(failures)
        .containsKeys(
            "aFinishWhoseAnswerIsLostAndItsRetryEndAsOneSuccess()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
    assertThat(failures.get("aFinishWhoseAnswerIsLostAndItsRetryEndAsOneSuccess()"))
        .contains("exactly one effect");
  }
}
