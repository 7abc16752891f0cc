package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The pause test every lock runs (the first of the three tests that prove a lock broken): holders
 * in child JVMs frozen with SIGSTOP between their check and their write until their leases expire,
 * resumed after a new holder has written. With the fence every stale write must be attempted and
 * refused; without it (the negative control) the auditor must report the lost update. A lock's test
 * extends this class and supplies its {@link PausableHolder}.
 */
public abstract class PauseContract {

  /** The holder the child JVMs run (public, no-argument constructor). */
  protected abstract Class<? extends PausableHolder> holderType();

  /** The {@code -D} settings the child JVMs' holders read. */
  protected abstract Map<String, String> childProperties();

  /** A holder in this JVM: the one that takes over. */
  protected abstract PausableHolder newHolder();

  /** What the timelines are labelled with, e.g. "PostgreSQL lock". */
  protected abstract String label();

  /** Holders frozen one after another in each run. */
  protected int pausedHolders() {
    return 2;
  }

  /** Fenced runs; each prints its timeline. */
  protected int fencedRuns() {
    return 2;
  }

  private PauseScenario scenario() {
    PauseScenario.Builder builder =
        PauseScenario.builder(holderType()).pausedHolders(pausedHolders());
    childProperties().forEach(builder::childSystemProperty);
    return builder.build();
  }

  @Test
  void staleWritesOfHoldersFrozenBetweenCheckAndWriteAreAllRefused() throws Exception {
    int attempted = 0;
    int refused = 0;
    try (PausableHolder newHolder = newHolder()) {
      for (int run = 1; run <= fencedRuns(); run++) {
        PauseScenario.Result result =
            scenario().run(newHolder, "pause-fenced-" + run, Protection.FENCED);
        System.out.println(label() + ", fenced, run " + run + ":\n" + result.timeline());

        assertThat(result.newHolderAccepted()).isTrue();
        assertThat(result.pausedWrites()).hasSize(pausedHolders());
        for (PauseScenario.PausedWrite stale : result.pausedWrites()) {
          assertThat(stale.attempted()).as("the stale write went out").isTrue();
          assertThat(stale.accepted()).as("and was refused").isFalse();
          assertThat(result.newHolderLease().token().isNewerThan(stale.token())).isTrue();
          attempted++;
          refused += stale.accepted() ? 0 : 1;
        }
        result.auditor().assertNoStaleWriteAccepted();
        assertThat(result.finalValue().toJavaOptional()).contains("new-holder");
      }
    }
    System.out.printf(
        "%s, fenced: %d stale writes attempted, %d refused%n", label(), attempted, refused);
    assertThat(attempted).isEqualTo(fencedRuns() * pausedHolders());
    assertThat(refused).isEqualTo(attempted);
  }

  @Test
  void negativeControlWithoutTheFenceTheAuditorReportsTheLostUpdate() throws Exception {
    try (PausableHolder newHolder = newHolder()) {
      PauseScenario.Result result =
          scenario().run(newHolder, "pause-unfenced", Protection.UNFENCED);
      System.out.println(label() + ", unfenced (negative control):\n" + result.timeline());

      assertThat(result.pausedWrites()).allMatch(PauseScenario.PausedWrite::accepted);
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Lost update");
      assertThat(result.finalValue().toJavaOptional()).isNotEqualTo(Optional.of("new-holder"));
      System.out.printf(
          "%s, unfenced: %d stale writes accepted (caught by the auditor)%n",
          label(), result.auditor().staleAcceptances().size());
    }
  }
}
