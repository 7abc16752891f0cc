package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.ZombieScenario.ChildSpec;
import dev.nolock.ownership.ZombieScenario.Fate;
import dev.nolock.ownership.ZombieScenario.Frozen;
import dev.nolock.ownership.ZombieScenario.Outcome;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The negative control of {@link ZombieOwnerIT}: the same freeze-move-resume scenario, smaller,
 * with the checks switched off in the frozen owners (through the package-private factory; the
 * public API has no switch).
 *
 * <ul>
 *   <li>{@code unfenced}: the epoch check and the offset check off. Resumed after its gated record
 *       was applied by the new owner, it applies it again: the bank shows the duplicate.
 *   <li>{@code no-epoch}: only the epoch check off. Its gated apply is no longer refused as a
 *       fenced zombie; the offset check still turns it into a skipped replay, so the bank stays
 *       right. This is why the epoch check matters for writes the offset check cannot see (state
 *       kept in memory, writes to other systems carrying the epoch), and why the first control
 *       switches both off.
 * </ul>
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ZombieNegativeControlIT {

  @Test
  void withTheOwnershipChecksOffAResumedZombieAppliesARecordTwice(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    ZombieScenario.Result run =
        ZombieScenario.run(
            kafka,
            pg,
            6,
            3_000,
            60,
            List.of(
                new ChildSpec("unfenced", "NONE", 100, Fate.FREEZE),
                new ChildSpec("no-epoch", "NO_EPOCH", 100, Fate.FREEZE)),
            true);

    Frozen unfenced = run.frozen().get(0);
    Frozen noEpoch = run.frozen().get(1);
    System.out.printf(
        "Negative control: unfenced zombie %s; epoch-check-off zombie %s; %s%n",
        unfenced.staleOutcomes(), noEpoch.staleOutcomes(), run.report());

    assertThat(unfenced.staleOutcomes())
        .as("the unfenced zombie's gated apply, with its old epoch, was accepted")
        .first()
        .isEqualTo(
            new Outcome(
                unfenced.gatedPartition(),
                unfenced.gatedOffset(),
                unfenced.gatedEpoch(),
                "APPLIED"));
    assertThat(run.report().duplicates())
        .as("the bank caught the command applied twice")
        .isNotEmpty();
    assertThat(run.report().wrongCounters()).as("a counter one too high").isNotEmpty();
    assertThat(run.report().clean()).isFalse();

    assertThat(noEpoch.staleOutcomes())
        .as("without the epoch check the zombie is not refused as fenced, only as a replay")
        .isNotEmpty()
        .extracting(Outcome::result)
        .doesNotContain("FENCED")
        .contains("REPLAY");
  }
}
