package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.Test;

/**
 * The election test every elector and backend runs: three candidates in child JVMs, the leader
 * frozen with SIGSTOP between its check and its write until another is elected, then resumed; the
 * second leader killed and replaced (see {@link ElectionScenario}). With the fence the frozen
 * leader's write must be attempted and refused, one leader's writes accepted per token; without it
 * (the negative control) the auditor must report the double leader's write. A test extends this
 * class and supplies its {@link ElectionCandidate}.
 */
public abstract class ElectionContract {

  /** The candidate the child JVMs run (public, no-argument constructor). */
  protected abstract Class<? extends ElectionCandidate> candidateType();

  /** The {@code -D} settings the child JVMs' candidates read. */
  protected abstract Map<String, String> childProperties();

  /** A candidate in this JVM that only reads the resource. */
  protected abstract ElectionCandidate newReader();

  /** What the timelines are labelled with, e.g. "Leader election on etcd". */
  protected abstract String label();

  private ElectionScenario scenario() {
    ElectionScenario.Builder builder = ElectionScenario.builder(candidateType());
    childProperties().forEach(builder::childSystemProperty);
    return builder.build();
  }

  private static String election(String what) {
    return "election-" + what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  @Test
  void aFrozenLeadersWriteIsRefusedAndAKilledLeaderIsReplaced() throws Exception {
    try (ElectionCandidate reader = newReader()) {
      ElectionScenario.Result result =
          scenario().run(reader, election("fenced"), Protection.FENCED);
      System.out.println(label() + ", fenced:\n" + result.timeline());
      assertThat(result.replacement().isDefined())
          .as("a fenced run goes on to kill and replace the second leader")
          .isTrue();
      ElectionScenario.Replacement replacement = result.replacement().get();
      ElectionScenario.Term third = replacement.term();
      System.out.printf(
          "%s: new leader %.1f s after the freeze, %.1f s after the kill (bound %.1f s)%n",
          label(),
          result.freezeToNewLeader().toMillis() / 1e3,
          replacement.killToNewLeader().toMillis() / 1e3,
          result.electionBound().toMillis() / 1e3);

      assertThat(List.of(result.first().identity(), result.second().identity(), third.identity()))
          .as("three different candidates led in turn")
          .doesNotHaveDuplicates();
      assertThat(result.second().token().isNewerThan(result.first().token())).isTrue();
      assertThat(third.token().isNewerThan(result.second().token())).isTrue();

      FenceAuditor auditor = result.auditor();
      String stale = result.first().owner();
      assertThat(auditor.attempts(stale)).as("the frozen leader's write went out").isEqualTo(1);
      assertThat(auditor.refusals(stale)).as("and was refused").isEqualTo(1);
      assertThat(result.staleWriteAccepted()).isFalse();
      assertThat(result.valueAfterStaleWrite().toJavaOptional())
          .contains(ElectionScenario.SECOND_VALUE);
      assertThat(result.secondAccepted()).as("the second leader's write").isTrue();
      assertThat(replacement.accepted()).as("the replacement's write").isTrue();
      assertThat(replacement.finalValue().toJavaOptional()).contains(ElectionScenario.THIRD_VALUE);
      auditor.assertNoStaleWriteAccepted();

      // onNewLeader across processes: each follower heard of every leader, once, in order.
      assertThat(result.leadersSeen().get(third.identity()))
          .containsExactly(result.first().identity(), result.second().identity(), third.identity());
      assertThat(result.leadersSeen().get(result.second().identity()))
          .containsExactly(result.first().identity(), result.second().identity());
      assertThat(result.leadersSeen().get(result.first().identity()))
          .startsWith(result.first().identity());
    }
  }

  @Test
  void negativeControlWithoutTheFenceTheAuditorReportsTheDoubleLeadersWrite() throws Exception {
    try (ElectionCandidate reader = newReader()) {
      ElectionScenario.Result result =
          scenario().run(reader, election("unfenced"), Protection.UNFENCED);
      System.out.println(label() + ", unfenced (negative control):\n" + result.timeline());

      assertThat(result.replacement().isEmpty())
          .as("the control ends after the stale write")
          .isTrue();
      assertThat(result.auditor().attempts(result.first().owner())).isEqualTo(1);
      assertThat(result.staleWriteAccepted()).isTrue();
      assertThat(result.valueAfterStaleWrite().toJavaOptional())
          .contains(ElectionScenario.FIRST_VALUE);
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Lost update");
    }
  }
}
