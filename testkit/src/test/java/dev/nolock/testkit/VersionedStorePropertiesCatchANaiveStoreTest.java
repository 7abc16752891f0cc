package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.LostAnswerVersions.Reaction;
import java.util.EnumSet;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.Events;

/**
 * {@link VersionedStoreProperties} passes a sound in-memory store (it answers "unknown" after a
 * lost answer) with every fault action over its floor, and fails a store whose client resends a
 * compare-and-set and believes the resend's conflict, and one whose {@code update} takes its own
 * resent write's conflict for another writer's and applies its change a second time.
 */
class VersionedStorePropertiesCatchANaiveStoreTest {

  /** Run only through the engine below (Surefire skips nested classes). */
  static class Sound extends VersionedStoreProperties {
    final InMemoryVersions server = new InMemoryVersions();
    final LostAnswerVersions plain = new LostAnswerVersions(server, Reaction.UNKNOWN);
    final LostAnswerVersions faulty = new LostAnswerVersions(server, Reaction.RESEND, naiveOn());

    /** The operations whose lost answer the client resends; none for the sound store. */
    Set<LostAnswerVersions.Operation> naiveOn() {
      return EnumSet.noneOf(LostAnswerVersions.Operation.class);
    }

    @Override
    protected VersionedStore<String, Long> store() {
      return plain;
    }

    @Override
    protected VersionedStore<String, Long> faultyStore() {
      return faulty;
    }

    @Override
    protected InjectedFault inject(Operation op, FaultKind kind) {
      faulty.disarmAll(); // a fault armed for a call that sent no request (an update of no key)
      return faulty.arm(op, kind, () -> {});
    }

    @Override
    public int defaultTries() {
      return 40;
    }
  }

  /** Resends a compare-and-set whose answer was lost and returns the resend's conflict. */
  static class BelievesItsResentCompareAndSet extends Sound {
    @Override
    Set<LostAnswerVersions.Operation> naiveOn() {
      return EnumSet.of(LostAnswerVersions.Operation.COMPARE_AND_SET);
    }
  }

  /**
   * Resends an update's compare-and-set whose answer was lost; the resend's conflict sends {@code
   * update} round its loop again, which re-reads its own write and adds k a second time.
   */
  static class UpdateAppliesItsChangeTwice extends Sound {
    @Override
    Set<LostAnswerVersions.Operation> naiveOn() {
      return EnumSet.of(LostAnswerVersions.Operation.UPDATE);
    }
  }

  @Test
  void aSoundStorePassesWithEveryFaultActionOverItsFloor() {
    Events events = ContractRuns.runProperties(Sound.class);

    assertThat(ContractRuns.firstFailure(events)).isEmpty();
    assertThat(events.succeeded().count()).isEqualTo(1);
  }

  @Test
  void aStoreThatBelievesItsResentCompareAndSetFailsOnAFalseConflict() {
    Events events = ContractRuns.runProperties(BelievesItsResentCompareAndSet.class);

    assertThat(events.failed().count()).isEqualTo(1);
    assertThat(ContractRuns.firstFailure(events))
        .contains("COMPARE_AND_SET")
        .contains("under ANSWER_LOST")
        .contains("a false conflict");
  }

  @Test
  void aStoreWhoseUpdateAppliesItsChangeTwiceOnAResendFails() {
    Events events = ContractRuns.runProperties(UpdateAppliesItsChangeTwice.class);

    assertThat(events.failed().count()).isEqualTo(1);
    assertThat(ContractRuns.firstFailure(events))
        .contains("UPDATE")
        .contains("under ANSWER_LOST")
        .contains("the change was applied more than once");
  }
}
