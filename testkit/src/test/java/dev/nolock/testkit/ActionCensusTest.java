package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.internal.CensusHook;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.Events;

class ActionCensusTest {

  private static final String LOST = ActionCensus.fault("RELEASE", FaultKind.ANSWER_LOST);

  @Test
  void aCensusBelowItsFloorFailsAndNamesTheShortAction() {
    ActionCensus census = new ActionCensus(4, List.of(LOST));
    for (int i = 0; i < 3; i++) {
      census.ran(LOST);
      census.ran("acquire");
    }

    assertThatThrownBy(census::check)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("below the floor of 4")
        .hasMessageContaining(LOST + "=3")
        .hasMessageContaining("-Dnolock.property.tries=N");
    census.ran(LOST);
    census.check();
    assertThat(census.report()).contains(LOST).contains("required >= 4").contains("acquire");
  }

  @Test
  void triesComeFromTheSystemPropertyWhenSet() {
    String before = System.getProperty(ActionCensus.TRIES_PROPERTY);
    try {
      System.clearProperty(ActionCensus.TRIES_PROPERTY);
      assertThat(ActionCensus.tries(7)).isEqualTo(7);
      System.setProperty(ActionCensus.TRIES_PROPERTY, "250");
      assertThat(ActionCensus.tries(7)).isEqualTo(250);
      System.setProperty(ActionCensus.TRIES_PROPERTY, "lots");
      assertThatThrownBy(() -> ActionCensus.tries(7))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("-Dnolock.property.tries=200");
    } finally {
      if (before == null) {
        System.clearProperty(ActionCensus.TRIES_PROPERTY);
      } else {
        System.setProperty(ActionCensus.TRIES_PROPERTY, before);
      }
    }
  }

  @Test
  void aGreenPropertyWhoseFaultActionsHardlyRanFailsTheRun() {
    Events events = ContractRuns.runProperties(NeverFaults.class);

    assertThat(events.failed().count()).isEqualTo(1);
    assertThat(ContractRuns.firstFailure(events))
        .contains("below the floor of 4")
        .contains(LOST + "=0");
  }

  /** Green on every try, but its fault action never runs. Run only through the engine. */
  static class NeverFaults implements CensusHook.Censused {
    private ActionCensus census;

    @Override
    public int defaultTries() {
      return 3;
    }

    @Override
    public ActionCensus startCensus() {
      census = new ActionCensus(4, List.of(LOST));
      return census;
    }

    @Property
    @AddLifecycleHook(CensusHook.class)
    void alwaysGreen(@ForAll boolean any) {
      census.ran("acquire");
    }
  }
}
