package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.LostAnswerVersions.Reaction;
import java.util.Map;
import java.util.Objects;
import org.junit.jupiter.api.Test;

/**
 * The lost-answer suite can fail: a store that resends a write whose answer was lost and believes
 * the resend's conflict, and one that "repairs" a refused resend by overwriting the key, are
 * caught; the sound store (it answers "unknown") passes.
 */
class VersionedStoreLostAnswerContractCatchesANaiveStoreTest {

  /** The suite on one in-memory server: {@link #store()} without faults, the client under test. */
  abstract static class InMemory extends VersionedStoreLostAnswerContract {
    private final InMemoryVersions server = new InMemoryVersions();
    private final LostAnswerVersions healthy = new LostAnswerVersions(server, Reaction.UNKNOWN);
    private final LostAnswerVersions client =
        new LostAnswerVersions(server, Objects.requireNonNull(reaction()));

    abstract Reaction reaction();

    @Override
    protected VersionedStore<String, Long> store() {
      return healthy;
    }

    @Override
    protected VersionedStore<String, Long> faultyStore() {
      return client;
    }

    @Override
    protected InjectedFault inject(Operation operation, FaultKind kind) {
      return client.arm(operation, kind, () -> {});
    }

    @Override
    protected InjectedFault inject(Operation operation, FaultKind kind, Runnable meanwhile) {
      return client.arm(operation, kind, meanwhile);
    }
  }

  /** Run only through the engine below (Surefire skips nested classes). */
  static class Sound extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.UNKNOWN;
    }
  }

  static class ResendsAndBelievesTheConflict extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.RESEND;
    }
  }

  static class ResendsAndOverwrites extends InMemory {
    @Override
    Reaction reaction() {
      return Reaction.RESEND_AND_OVERWRITE;
    }
  }

  @Test
  void aStoreThatAnswersUnknownPassesEveryCase() {
    var tests = ContractRuns.run(Sound.class);

    assertThat(ContractRuns.failures(tests)).isEmpty();
    assertThat(tests.succeeded().count()).as("13 cases x 2 fault kinds").isEqualTo(26);
  }

  @Test
  void aStoreThatBelievesItsResendsConflictIsCaughtOnEveryLostAnswer() {
    Map<String, String> failures =
        ContractRuns.failures(ContractRuns.run(ResendsAndBelievesTheConflict.class));

    assertThat(failures.keySet())
        .as("every case fails with ANSWER_LOST, none with REQUEST_LOST (the resend lands)")
        .hasSize(13)
        .allSatisfy(name -> assertThat(name).endsWith("ANSWER_LOST"));
    assertThat(
            failures.get("anInsertUnderAFaultIsSuccessOrUnknownAndLeavesItsValueOnce ANSWER_LOST"))
        .contains("insert under ANSWER_LOST answered conflict")
        .contains("a conflict for a write that was not refused");
    assertThat(failures.get("aDeleteUnderAFaultIsSuccessOrUnknownAndTheKeyIsGone ANSWER_LOST"))
        .contains("delete under ANSWER_LOST answered conflict");
    assertThat(
            failures.get(
                "anUpdateUnderAFaultRunsItsChangeAtMostOnceAndAddsItAtMostOnce ANSWER_LOST"))
        .contains("+10 applied at most once")
        .contains("120");
  }

  @Test
  void aStoreThatOverwritesAfterARefusedResendIsCaughtWhenAnotherWriterGotIn() {
    Map<String, String> failures =
        ContractRuns.failures(ContractRuns.run(ResendsAndOverwrites.class));

    assertThat(failures.keySet())
        .as("only the cases with another writer between the fault and the answer")
        .hasSize(9)
        .allSatisfy(name -> assertThat(name).contains("WhileAnotherWriter"));
    assertThat(
            failures.get(
                "aCompareAndSetUnderAFaultWhileAnotherWriterChangesTheKeyNeverOverwritesIt"
                    + " REQUEST_LOST"))
        .contains("a success overwrote the other writer");
    assertThat(
            failures.get(
                "anInsertUnderAFaultWhileAnotherWriterDeletesTheKeyNeverBringsItBack ANSWER_LOST"))
        .contains("the delete stands");
  }
}
